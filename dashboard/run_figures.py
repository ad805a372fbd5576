"""The run view's waterfall: a pure Plotly builder (run summary and steps in, Figure out).

Steps are bars from their start to their end, coloured by docs/metrics.md §3 class, nested
steps indented under their top-level step, each named with its number (`#3`, `#3.1` inside it,
as the culprit and holder are named); a step that failed, was refused or cancelled also gets a
marker at its end, so a 0 ms refusal or a 9 ms upstream failure is seen whatever its width. The
deadline, the landing reserve and the run's end are vertical lines; the culprit (or largest
consumer) and the holder are outlined and labelled. Under it, for each top-level step, the
budget that remained when it started beside the allocation it got: a step given less than
what remained was capped, one given all of it had the deadline as its limit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard import colors, fmt

ROW_PX = 24
# What a label's width is taken to be on the time axis: ~7 px a character of Plotly's 12 px
# font, on a plot area of at least PLOT_PX (the narrowest: a 900 px window, the sidebar
# collapsed, less the step names). Wider plots only leave more room.
CHAR_PX, PLOT_PX = 7.0, 600.0


def label_width(text: str, room: float) -> float:
    """The width of `text` in the axis's unit, on an axis `room` wide."""
    return (len(text) + 2) * CHAR_PX / PLOT_PX * room


def label_place(x0: float, x1: float, width: float,
                lines: list[float]) -> tuple[float, str, int]:
    """Where a bar's label goes so that no vertical line crosses it: (x, xanchor, xshift).
    Right of the bar's end when no line is within the label's width there; else left of its
    start when that fits on the axis and no line is there; else inside the bar, from its
    start, when the bar holds it; else right of the end after all."""
    def clear(a: float, b: float) -> bool:
        return not any(a <= line <= b for line in lines)

    if clear(x1, x1 + width):
        return x1, "left", 6
    if x0 - width >= 0 and clear(x0 - width, x0):
        return x0, "right", -6
    if x1 - x0 >= width and clear(x0, x0 + width):
        return x0, "left", 6
    return x1, "left", 6


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
        height=max(420, 140 + ROW_PX * n + 200),
        # The legend below the time axis, in container coordinates: above the plot its two
        # lines (classes, marks, the budget panel) ran over the title at 1400 px.
        margin=dict(l=10, r=10, t=50, b=110),
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0))

    rows = steps.reset_index(drop=True)
    numbers = rows["number"] if "number" in rows else pd.Series(
        [str(i + 1) for i in range(n)], dtype=object)
    # Unique row labels (the number makes them so), nested steps indented: the y axis is
    # categorical.
    names = [f"{'    ' * int(level)}{'└ ' if level else ''}#{number} {fmt.plot_text(key)}"
             for key, level, number in zip(rows["step_key"], rows["step_level"], numbers,
                                           strict=True)]
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
            f"#{number} {fmt.plot_text(k)}<br>class {name}<br>start +{fmt.duration(o)}"
            f"<br>duration {fmt.duration(d)}<br>allocated {fmt.duration(a)}"
            f"<br>share {fmt.percent(s)}"
            for number, k, o, d, a, s in zip(numbers[part.index], part["step_key"],
                                             part["offset_ms"], part["duration_ms"],
                                             part["allocated_ms"], share, strict=True)]
        figure.add_bar(
            y=[names[i] for i in part.index], x=(part["duration_ms"] / div).to_numpy(),
            base=(part["offset_ms"] / div).to_numpy(), orientation="h",
            marker=dict(color=colors.class_color(name),
                        opacity=[0.55 if lvl else 1.0 for lvl in part["step_level"]]),
            name=colors.CLASS_LABELS[name], legendgroup=name, showlegend=name not in shown,
            # the step's row: a click on the bar opens its details (dashboard/app_pages/run.py)
            customdata=list(part.index), hovertext=hover, hoverinfo="text", row=1, col=1)
        shown.add(name)
    failed = rows[rows["step_class"] != "ok"]
    if len(failed):
        # One marker per failed, refused or cancelled step at its end, in its class colour:
        # a bar of 0 ms (a refusal) or a few ms (a fast upstream failure) draws nothing.
        ends = (failed["offset_ms"] + failed["duration_ms"]) / div
        figure.add_scatter(
            x=ends.to_numpy(), y=[names[i] for i in failed.index], mode="markers",
            marker=dict(symbol="x-thin-open", size=11, line=dict(width=2.5),
                        color=[colors.class_mark(c) for c in failed["step_class"]]),
            name="failed, refused or cancelled (marked at its end)",
            customdata=list(failed.index),
            hovertext=[f"#{numbers[i]} {fmt.plot_text(k)}<br>{fmt.plot_text(c)} at "
                       f"+{fmt.duration(o + d)}" for i, k, c, o, d in zip(
                           failed.index, failed["step_key"], failed["step_class"],
                           failed["offset_ms"], failed["duration_ms"], strict=True)],
            hoverinfo="text", row=1, col=1)
    spender = "culprit" if not fmt.missing(summary.get("exhausted")) and bool(
        summary.get("exhausted")) else "largest consumer"
    marks = sorted(_marks(summary, deadline_ms, end_ms))
    mark_xs = [x / div for x, *_ in marks]
    room = horizon / div  # the axis's width in its unit
    for span_id, label, dash in ((culprit, spender, "solid"), (holder, "holder", "dot")):
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
                           line=dict(color=colors.OUTLINE, width=3, dash=dash), name=label,
                           customdata=[i] * 5, hoverinfo="skip", row=1, col=1)
        both = span_id == holder and label == spender
        text = (f"★ {spender} = holder" if both else f"★ {spender}" if label == spender
                else "⚑ holder")
        x, anchor, shift = label_place(x0, x1, label_width(text, room), mark_xs)
        inside = x == x0 and anchor == "left"
        # Inside the bar, on the class's fill: white on a dark box reads on every fill, in
        # either theme (the theme's own text colour on amber did not).
        figure.add_annotation(x=x, y=names[i], text=text, showarrow=False, xanchor=anchor,
                              xshift=shift, row=1, col=1,
                              **(dict(font=dict(color=colors.INSIDE_TEXT),
                                      bgcolor=colors.INSIDE_BOX) if inside else {}))
    lowered = False
    for i, (x, text, color, dash) in enumerate(marks):
        # A mark's label goes on the side with room: right of its line unless another line
        # is within the label's width there (the reserve, just before the deadline: left);
        # with lines close on both sides (a run that ended between its reserve and its
        # deadline) it goes to the legend instead, drawn as its line is, so that no line
        # ever crosses a label. A label close to the one before it is a line lower.
        width = label_width(text, room)
        others = [other for j, other in enumerate(mark_xs) if j != i]
        right_free = not any(x / div < other <= x / div + width for other in others)
        left_free = not any(x / div - width <= other < x / div for other in others)
        line = dict(color=color, dash=dash, width=2)
        if not (right_free or left_free):
            figure.add_vline(x=x / div, line=line, row="all", col=1)
            figure.add_scatter(x=[None], y=[None], mode="lines", line=line,
                               name=f"{text} (+{fmt.duration(x)})", row=1, col=1)
            continue
        lowered = (i > 0 and not lowered
                   and x - marks[i - 1][0] < 0.12 * max(end_ms, 1e-3))
        figure.add_vline(x=x / div, line=line, annotation_text=text, row="all", col=1,
                         annotation=dict(yshift=-16 if lowered else 0),
                         annotation_position="top right" if right_free else "top left")

    if not fmt.missing(budget) and deadline_ms is not None:
        _remaining_at_each_start(figure, rows, numbers, deadline_ms, div, unit)
    # Waterfall order, top to bottom: traces are added per class, so the category order must
    # be given, or Plotly orders rows by the trace they first appear in.
    figure.update_yaxes(categoryorder="array", categoryarray=names, autorange="reversed",
                        row=1, col=1, tickfont=dict(size=11))
    figure.update_xaxes(title_text=f"time since run start ({unit})", row=2, col=1)
    return figure


def _remaining_at_each_start(figure: go.Figure, rows: pd.DataFrame, numbers: pd.Series,
                             deadline_ms: float, div: float, unit: str) -> None:
    """Row 2: at each top-level step's start, the budget left (budget.remaining_ms when the
    agent sent it, else the deadline minus the start) beside the allocation the step got
    (budget.allocated_ms, or a declared cap's). Where the two differ the step was capped;
    where no allocation shows, it ran with no limit of its own."""
    top = rows[rows["step_level"] == 0]
    if top.empty:
        return
    starts = top["offset_ms"].astype(float)
    recorded = top["remaining_ms"].astype(float) if "remaining_ms" in top else \
        pd.Series(np.nan, index=top.index)
    left = recorded.where(recorded.notna(), deadline_ms - starts)
    allocated = top["allocated_ms"].astype(float)
    labels = [f"#{numbers[i]} {fmt.plot_text(k)}" for i, k in zip(top.index, top["step_key"],
                                                                strict=True)]
    figure.add_scatter(
        x=(starts / div).to_numpy(), y=(left / div).to_numpy(), mode="lines+markers",
        line=dict(color=colors.REMAINING, width=2, shape="hv"), name="budget left at its start",
        marker=dict(size=7), customdata=np.stack([labels, [fmt.duration(v) for v in left]],
                                                  axis=-1),
        hovertemplate="%{customdata[0]}<br>%{customdata[1]} of the budget left when it started"
                      "<extra></extra>", row=2, col=1)
    given = allocated.notna()
    if given.any():
        figure.add_bar(
            x=(starts[given] / div).to_numpy(), y=(allocated[given] / div).to_numpy(),
            width=max(float(deadline_ms) / div / 150, 1e-6), name="allocation it got",
            marker_color=colors.ALLOCATION,
            customdata=np.stack([[labels[j] for j, g in enumerate(given) if g],
                                 [fmt.duration(v) for v in allocated[given]],
                                 [fmt.duration(v) for v in left[given]]], axis=-1),
            hovertemplate="%{customdata[0]}<br>allocated %{customdata[1]} of the "
                          "%{customdata[2]} left<extra></extra>", row=2, col=1)
    figure.add_hline(y=0, line=dict(color=colors.GUIDE, width=1), row=2, col=1)
    figure.update_yaxes(title_text=f"left ({unit})", rangemode="tozero", row=2, col=1)


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
        marks.append((run_end, "run end", colors.GUIDE, "dot"))
    return marks
