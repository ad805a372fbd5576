"""The run view's waterfall: a pure Plotly builder (run summary and steps in, Figure out).

Steps are bars from their start to their end, coloured by SPEC §3 class, nested steps indented
under their top-level step; the deadline, the landing reserve and the run's end are vertical
lines; the culprit and the holder are outlined and labelled; under it, the budget remaining
over time (B at the start, 0 at the deadline, negative past it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard import colors, fmt

ROW_PX = 24


def _offset(ns: object, start_ns: int) -> float | None:
    return None if fmt.missing(ns) else (int(ns) - start_ns) / 1e6  # type: ignore[arg-type]


def waterfall(summary: pd.Series, steps: pd.DataFrame) -> go.Figure:
    start = int(summary["start_ns"])
    deadline_ms = _offset(summary["deadline_ns"], start)
    end_ms = (int(summary["latest_end_ns"]) - start) / 1e6
    horizon = max(end_ms, deadline_ms or 0.0, 1e-3)
    unit, div = fmt.duration_axis_unit(horizon)
    n = len(steps)
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                           row_heights=[0.78, 0.22])
    figure.update_layout(
        title=dict(text="Steps against the deadline"), barmode="overlay",
        height=max(360, 140 + ROW_PX * n + 140),
        margin=dict(l=10, r=10, t=50, b=10),
        legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"))

    rows = steps.reset_index(drop=True)
    # Unique row labels, nested steps indented: the y axis is categorical.
    names = [f"{'    ' * int(level)}{'└ ' if level else ''}{fmt.plot_text(key)}"
             f"<span style='color:#999'> #{i + 1}</span>"
             for i, (key, level) in enumerate(zip(rows["step_key"], rows["step_level"],
                                                  strict=True))]
    culprit = summary.get("culprit_span_id")
    holder = summary.get("holder_span_id")
    budget = summary.get("budget_ms")
    shown: set[str] = set()
    for name in colors.STEP_CLASSES:
        mask = (rows["step_class"] == name).to_numpy()
        if not mask.any():
            continue
        part = rows[mask]
        share = (part["consumption_ms"] / float(budget)) if not fmt.missing(budget) else \
            pd.Series(np.nan, index=part.index)
        hover = [
            f"{fmt.plot_text(k)}<br>class {name}<br>start +{fmt.duration(o)}"
            f"<br>duration {fmt.duration(d)}<br>allocated {fmt.duration(a)}"
            f"<br>share {fmt.percent(s)}"
            for k, o, d, a, s in zip(part["step_key"], part["offset_ms"], part["duration_ms"],
                                     part["allocated_ms"], share, strict=True)]
        figure.add_bar(
            y=[names[i] for i in part.index], x=(part["duration_ms"] / div).to_numpy(),
            base=(part["offset_ms"] / div).to_numpy(), orientation="h",
            marker=dict(color=colors.class_color(name),
                        opacity=[0.55 if lvl else 1.0 for lvl in part["step_level"]]),
            name=colors.CLASS_LABELS[name], legendgroup=name, showlegend=name not in shown,
            hovertext=hover, hoverinfo="text", row=1, col=1)
        shown.add(name)
    for span_id, label, dash in ((culprit, "culprit", "solid"), (holder, "holder", "dot")):
        if fmt.missing(span_id) or (label == "holder" and span_id == culprit):
            continue  # a culprit that is also the holder has one label, "culprit = holder"
        hit = rows.index[rows["span_id"] == span_id]
        if len(hit) == 0:
            continue
        i = int(hit[0])
        step = rows.iloc[i]
        x0 = float(step["offset_ms"]) / div
        x1 = x0 + float(step["duration_ms"]) / div
        figure.add_scatter(x=[x0, x1, x1, x0, x0], y=[names[i]] * 5, mode="lines",
                           line=dict(color="#000000", width=3, dash=dash), name=label,
                           hoverinfo="skip", row=1, col=1)
        both = span_id == holder and label == "culprit"
        figure.add_annotation(x=x1, y=names[i], text=("★ culprit = holder" if both else
                                                      "★ culprit" if label == "culprit"
                                                      else "⚑ holder"),
                              showarrow=False, xanchor="left", xshift=6, row=1, col=1)
    marks = sorted(_marks(summary, deadline_ms, end_ms))
    lowered = False
    for i, (x, text, color, dash) in enumerate(marks):
        # The reserve sits just before the deadline: label it on the left, the rest on the
        # right. A mark close to the one before it (a run that ended just after its reserve
        # began printed "reserverun end") has its label a line lower, the next one up again.
        lowered = (i > 0 and not lowered
                   and x - marks[i - 1][0] < 0.12 * max(end_ms, 1e-3))
        figure.add_vline(x=x / div, line=dict(color=color, dash=dash, width=2),
                         annotation_text=text, row="all", col=1,
                         annotation=dict(yshift=-16 if lowered else 0),
                         annotation_position="top left" if text == "reserve" else "top right")

    if not fmt.missing(budget) and deadline_ms is not None:
        # Remaining budget = d - t: B at the start (when d = s + B), 0 at the deadline.
        xs = np.array([0.0, deadline_ms, max(horizon, deadline_ms)])
        ys = deadline_ms - xs
        figure.add_scatter(x=xs / div, y=ys / div, mode="lines", name="budget remaining",
                           line=dict(color=colors.REMAINING, width=2), fill="tozeroy",
                           hovertemplate="%{y:.2f} " + unit + " left<extra></extra>",
                           row=2, col=1)
        figure.add_hline(y=0, line=dict(color="#666666", width=1), row=2, col=1)
        figure.update_yaxes(title_text=f"left ({unit})", row=2, col=1)
    # Waterfall order, top to bottom: traces are added per class, so the category order must
    # be given, or Plotly orders rows by the trace they first appear in.
    figure.update_yaxes(categoryorder="array", categoryarray=names, autorange="reversed",
                        row=1, col=1, tickfont=dict(size=11))
    figure.update_xaxes(title_text=f"time since run start ({unit})", row=2, col=1)
    return figure


def _marks(summary: pd.Series, deadline_ms: float | None,
           end_ms: float) -> list[tuple[float, str, str, str]]:
    marks: list[tuple[float, str, str, str]] = []
    if deadline_ms is not None:
        marks.append((deadline_ms, "deadline", colors.DEADLINE, "solid"))
        reserve = summary.get("reserve_ms")
        if not fmt.missing(reserve) and float(reserve) > 0:
            marks.append((deadline_ms - float(reserve), "reserve", colors.RESERVE, "dash"))
    run_end = (int(summary["end_ns"]) - int(summary["start_ns"])) / 1e6
    # A run end within 2% of the deadline would only print over the deadline's label.
    if deadline_ms is None or abs(run_end - deadline_ms) > 0.02 * max(end_ms, 1e-3):
        marks.append((run_end, "run end", "#666666", "dot"))
    return marks
