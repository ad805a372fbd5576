"""Pure Plotly builders for the aggregate pages: DataFrame in, Figure out (no Streamlit, so
they are testable on their own). Colours come from colors.py only; any text that came from a
span is escaped with fmt.plot_text, because Plotly renders a subset of HTML in labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard import colors, fmt

# The legend sits in the bottom margin, below the x axis title, in container coordinates, so it
# never overlaps the axis whatever the chart's height.
_LAYOUT = dict(margin=dict(l=10, r=10, t=40, b=100),
               legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0),
               hovermode="closest")


def _figure(title: str, **layout: object) -> go.Figure:
    figure = go.Figure()
    figure.update_layout(title=dict(text=title), **{**_LAYOUT, **layout})
    return figure


def labels(values: Sequence[object]) -> list[str]:
    return [fmt.plot_text(v) for v in values]


def empty(title: str, message: str) -> go.Figure:
    figure = _figure(title)
    figure.add_annotation(text=fmt.plot_text(message), showarrow=False, x=0.5, y=0.5,
                          xref="paper", yref="paper")
    figure.update_xaxes(visible=False)
    figure.update_yaxes(visible=False)
    return figure


# Percentile lines told apart by dash and width as well as by their grey: the tail, p99,
# solid and widest (the greys alone differ little, to stand out on both themes' pages).
PERCENTILE_LINES: dict[str, dict[str, object]] = {
    "p50": dict(dash="dot", width=1.5), "p90": dict(dash="dash", width=1.5),
    "p99": dict(dash="solid", width=2.5)}


# ---- overview ----------------------------------------------------------------------------

def rate_axis(top: float) -> dict[str, object]:
    """A percent axis from 0 whose ticks are round (0, 2, 4, 6%, never 0, 15, 29, 44%), with the
    decimals its step needs."""
    top = top if np.isfinite(top) and top > 0 else 0.01
    step = next((s for s in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5)
                 if top / s <= 5), 1.0)
    decimals = 1 if step < 0.01 else 0
    return dict(tick0=0, dtick=step, tickformat=f".{decimals}%",
                range=[0, step * np.ceil(top * 1.05 / step)],
                hoverformat=".1%")


def daily_trends(daily: pd.DataFrame, bucket: str = "day") -> go.Figure:
    """Runs per day (or hour) with, each on an axis of its own, the exhaustion rate and the
    utilisation p50/p99 of the runs with a budget. Buckets without runs are bars at zero."""
    per = "hour" if bucket == "hour" else "day"
    title = ("Hourly" if bucket == "hour" else "Daily") + \
        " runs, exhaustion rate and utilisation"
    figure = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                           row_heights=[0.4, 0.3, 0.3])
    figure.update_layout(title=dict(text=title), height=560, bargap=0.15,
                         **{**_LAYOUT, "hovermode": "x unified"})
    when = "%{x|%Y-%m-%d %H:00} UTC" if per == "hour" else "%{x|%Y-%m-%d} (UTC)"
    x = pd.to_datetime(daily["bucket"]) if len(daily) else []
    figure.add_bar(x=x, y=daily["runs"], name="runs", marker_color=colors.NEUTRAL, row=1, col=1,
                   hovertemplate=f"{when}<br>%{{y:,}} runs started<extra></extra>")
    counts = np.column_stack([daily["exhausted_runs"], daily["budgeted_runs"]]) \
        if len(daily) else []
    figure.add_scatter(x=x, y=daily["exhaustion_rate"], name="exhaustion rate",
                       mode="lines+markers", connectgaps=False, customdata=counts,
                       line=dict(color=colors.OUTCOME_COLORS["exhausted"]), row=2, col=1,
                       hovertemplate=f"{when}<br>exhaustion rate %{{y:.1%}}: "
                                     "%{customdata[0]:,} of %{customdata[1]:,} runs with a "
                                     "budget<extra></extra>")
    for column, name in (("utilisation_p50", "p50"), ("utilisation_p99", "p99")):
        figure.add_scatter(x=x, y=daily[column], name=f"utilisation {name}", mode="lines+markers",
                           connectgaps=False, customdata=daily["budgeted_runs"],
                           line=dict(color=colors.PERCENTILE_COLORS[name],
                                     **PERCENTILE_LINES[name]),
                           row=3, col=1,
                           hovertemplate=f"{when}<br>utilisation {name} %{{y:.1%}} of "
                                         "%{customdata:,} runs with a budget<extra></extra>")
    most = float(daily["runs"].max()) if len(daily) else 0.0
    figure.update_yaxes(title_text=f"runs per {per}", rangemode="tozero", tickformat=",d",
                        **({"dtick": 1} if most <= 5 else {}), row=1, col=1)
    figure.update_yaxes(title_text="exhaustion rate",
                        **rate_axis(float(daily["exhaustion_rate"].max()) if len(daily)
                                    else 0.0), row=2, col=1)
    top = float(daily[["utilisation_p50", "utilisation_p99"]].max().max()) if len(daily) else 1.0
    figure.update_yaxes(title_text="utilisation", **rate_axis(top), row=3, col=1)
    figure.update_xaxes(tickformat="%H:%M\n%b %d" if per == "hour" else "%b %d",
                        dtick=(3 if per == "hour" else 1) * (3_600_000 if per == "hour"
                                                             else 86_400_000)
                        if len(daily) <= 31 else None, row=3, col=1)
    return figure


def class_counts_over_time(frame: pd.DataFrame, x: str, title: str,
                           classes: Sequence[str] = colors.STEP_CLASSES[1:]) -> go.Figure:
    """Bars per period, one colour per docs/metrics.md §3 class (`frame` has one column per class
    name), side by side: stacked, a day's client give-ups and upstream failures were segments of one
    bar, which docs/guide.md promises they never are."""
    figure = _figure(title, barmode="group", bargap=0.15, bargroupgap=0.05,
                     yaxis=dict(title="steps"))
    for name in classes:
        if name in frame:
            figure.add_bar(x=frame[x], y=frame[name], name=colors.CLASS_LABELS[name],
                           marker_color=colors.class_color(name),
                           hovertemplate=f"%{{x}}<br>{fmt.plot_text(colors.CLASS_LABELS[name])}"
                                         ": %{y:,} steps<extra></extra>")
    return figure


# Named for what it ranks by: the budget share, not how many runs a step was the culprit of
# (it was titled "Top culprits" over a ranking by share); that count is in each bar's tooltip.
# Short enough for half the page at 900 px ("… (by step key)" was cut there).
TOP_SHARE_TITLE = "Largest budget shares of exhausted runs"


def culprits(attribution: pd.DataFrame, top: int = 10,
             title: str = TOP_SHARE_TITLE) -> go.Figure:
    """Budget share of exhausted runs per step key, largest first."""
    rows = attribution.head(top).iloc[::-1]
    figure = _figure(title, xaxis=dict(title="share of exhausted runs' budget",
                                       tickformat=".0%"),
                     height=max(260, 40 + 28 * len(rows)))
    figure.add_bar(y=labels(rows["step_key"]), x=rows["budget_share"], orientation="h",
                   marker_color=colors.NEUTRAL, name="budget share",
                   customdata=np.stack([rows["culprit_runs"], rows["holder_runs"],
                                        rows["step_key"].astype(str)], axis=-1)
                   if len(rows) else None,
                   hovertemplate="%{y}: %{x:.1%} of the budget<br>culprit in %{customdata[0]}"
                                 " runs, holder in %{customdata[1]}<extra></extra>")
    return figure


# ---- attribution -------------------------------------------------------------------------

@dataclass(frozen=True)
class MatrixWords:
    """What a matrix of exhausted runs calls its rows' step (the holder, or the cost crosser)
    and says of its cells: the attribution page's holder × culprit, the Cost page's crosser ×
    culprit (docs/metrics.md §4, §11.6)."""

    title: str = "Holder × culprit (exhausted runs)"
    row: str = "holder"
    row_axis: str = "holder (held the deadline)"
    other_step: str = "another step held the deadline"
    drill: bool = True  # a click lists the cell's runs


HOLDER_WORDS = MatrixWords()


def holder_culprit_matrix(keys: Sequence[str], cells: pd.DataFrame,
                          wording: MatrixWords = HOLDER_WORDS) -> go.Figure:
    """Exhausted runs by holder (rows) × culprit (columns) on one key order for both axes, so
    that a step key's own cell is on the drawn diagonal. Cells are square markers (a scatter:
    a point of it can be selected, a heatmap cell cannot), shaded by their share of the runs,
    each carrying (holder, culprit) for a click to open its runs. `wording`: another step in
    the holder's place (the cost crosser)."""
    shown = labels(keys)
    n = max(1, len(keys))
    figure = _figure(wording.title,
                     xaxis=dict(title="culprit (spent the most)", categoryorder="array",
                                categoryarray=shown, range=[-0.5, n - 0.5], tickangle=-30),
                     yaxis=dict(title=wording.row_axis, categoryorder="array",
                                categoryarray=shown, range=[n - 0.5, -0.5]),
                     height=max(360, 160 + 44 * n), showlegend=False,
                     plot_bgcolor="#FFFFFF")
    # The diagonal: the holder has the culprit's step key (the same call, or another call of
    # the same step); off it, another step held the deadline.
    figure.add_shape(type="line", x0=-0.5, y0=-0.5, x1=n - 0.5, y1=n - 0.5, xref="x",
                     yref="y", line=dict(color=colors.GUIDE, width=1, dash="dot"), layer="below")
    if cells.empty:
        return figure
    total = float(cells["runs"].sum())
    share = cells["runs"] / total
    other_calls = cells["runs"] - cells["same_call"]
    on_diagonal = cells["holder"] == cells["culprit"]
    words = [f"{int(same)} the same call, {int(other)} another call of the same step"
             if diagonal else wording.other_step
             for same, other, diagonal in zip(cells["same_call"], other_calls, on_diagonal,
                                              strict=True)]
    figure.add_scatter(
        x=labels(cells["culprit"]), y=labels(cells["holder"]), mode="markers+text",
        marker=dict(symbol="square", size=38, color=share,
                    colorscale=[[0.0, "#F0F0F0"], [1.0, "#333333"]], cmin=0,
                    cmax=float(share.max()), line=dict(color=colors.GUIDE, width=1)),
        text=[str(int(v)) for v in cells["runs"]],
        textfont=dict(color=["#FFFFFF" if v > 0.6 * float(share.max()) else "#000000"
                             for v in share]),
        customdata=np.stack([[f"{h}\x1f{c}" for h, c in zip(cells["holder"], cells["culprit"],
                                                             strict=True)],
                             [fmt.percent(v) for v in share], words], axis=-1),
        hovertemplate=f"{wording.row} %{{y}}<br>culprit %{{x}}<br>%{{text}} runs "
                      "(%{customdata[1]}): %{customdata[2]}"
                      + ("<br>click to list them" if wording.drill else "") + "<extra></extra>",
        name="runs")
    return figure


def share_side_by_side(shares: pd.DataFrame) -> go.Figure:
    """Budget share per step key: exhausted vs completed runs (columns step_key, exhausted,
    completed), so steps whose share grows when runs die stand out."""
    figure = _figure("Budget share per step: exhausted vs completed runs", barmode="group",
                     xaxis=dict(tickformat=".0%", title="share of the runs' budget"),
                     height=max(300, 60 + 34 * len(shares)))
    rows = shares.iloc[::-1]
    for column, name, colour in (("completed", "completed runs", colors.COMPARE),
                                 ("exhausted", "exhausted runs",
                                  colors.OUTCOME_COLORS["exhausted"])):
        figure.add_bar(y=labels(rows["step_key"]), x=rows[column], orientation="h",
                       name=name, marker_color=colour,
                       hovertemplate=f"step key %{{y}}<br>%{{x:.1%}} of the budget of the {name}"
                                     "<extra></extra>")
    return figure


# ---- failures ----------------------------------------------------------------------------

def failures_by_step(failures: pd.DataFrame, top: int = 15, min_height: int = 300,
                     as_rate: bool = False) -> go.Figure:
    """Failed steps per step key, one bar per class side by side (client give-ups and upstream
    failures never share a bar); as counts, or as each class's share of the key's steps.
    Each bar carries (step key, class) for a click to open the runs behind it."""
    rows = failures.copy()
    failing = [c for c in colors.FAILURE_COLUMNS if c != "ok"]
    rows["failed"] = rows[failing].sum(axis=1)
    rows = rows[rows["failed"] > 0].sort_values(["failed", "step_key"], ascending=[False, True])
    rows = rows.head(top).iloc[::-1]
    title = "Failure rate per step key, by class" if as_rate else "Failures per step key, by class"
    figure = _figure(title, barmode="group",
                     xaxis=dict(title="share of the key's steps" if as_rate else "steps",
                                tickformat=".1%" if as_rate else None),
                     height=max(min_height, 60 + 10 * len(failing) * len(rows)))
    for column in failing:
        name = colors.FAILURE_COLUMNS[column]
        rate = rows[column] / rows["steps"].where(rows["steps"] > 0)
        figure.add_bar(y=labels(rows["step_key"]), x=rate if as_rate else rows[column],
                       orientation="h", name=colors.CLASS_LABELS[name],
                       marker_color=colors.class_color(name),
                       customdata=np.stack([rows["step_key"].astype(str), [name] * len(rows),
                                            rows[column], rows["steps"], rate.fillna(0)],
                                           axis=-1) if len(rows) else None,
                       hovertemplate="%{y}<br>" + fmt.plot_text(colors.CLASS_LABELS[name])
                                     + ": %{customdata[2]} of %{customdata[3]} steps "
                                       "(%{customdata[4]:.1%})<extra></extra>")
    return figure


def latency_against_cap(latency: pd.DataFrame, tool: str) -> go.Figure:
    """One tool's call latencies (column duration_ms, cap_ms, class) as a histogram, with its
    cap and p95 marked: a cap below the tail is visible as calls piling up at the cap, drawn in
    amber (a call cut at its cap is a client give-up, client_timeout), the others in blue."""
    durations = latency["duration_ms"].dropna().to_numpy(dtype=float)
    caps = latency["cap_ms"].dropna().to_numpy(dtype=float)
    unit, div = fmt.duration_axis_unit(float(max(durations.max(initial=0),
                                                 caps.max(initial=0))))
    figure = _figure(f"{fmt.plot_text(tool)}: call latency against its cap",
                     xaxis=dict(title=f"latency ({unit})"), yaxis=dict(title="calls"),
                     bargap=0.02, barmode="stack")
    cut = (latency["class"] == "client_timeout") if "class" in latency else \
        pd.Series(False, index=latency.index)
    top = float(durations.max(initial=0)) / div
    bins = dict(start=0, end=top * 1.0001 + 1e-9, size=max(top / 60, 1e-9))
    for part, name, colour in ((~cut, "calls that finished", colors.NEUTRAL),
                               (cut, "calls cut at their cap or deadline (client give-up)",
                                colors.class_color("client_timeout"))):
        values = latency.loc[part, "duration_ms"].dropna().to_numpy(dtype=float)
        if not values.size:
            continue
        figure.add_histogram(x=values / div, xbins=bins, name=name, marker_color=colour,
                             hovertemplate=f"{fmt.plot_text(tool)}, {name}<br>latency %{{x}} "
                                           f"{unit}<br>%{{y:,}} of {durations.size:,} calls"
                                           "<extra></extra>")
    if durations.size:
        p95 = float(np.quantile(durations, 0.95))
        figure.add_vline(x=p95 / div, line=dict(color=colors.P95, dash="dash"),
                         annotation_text=f"p95 {fmt.duration(p95)}")
    if caps.size:
        cap = float(np.median(caps))
        figure.add_vline(x=cap / div, line=dict(color=colors.CAP, width=2),
                         annotation_text=f"cap {fmt.duration(cap)}",
                         annotation_position="top left")
    return figure


# ---- utilisation -------------------------------------------------------------------------

def _panel_vline(panel: int, x: float, line: dict[str, object]) -> dict[str, object]:
    """What add_vline(x, row=panel, col=1) adds to a one-column make_subplots figure: a line
    across the panel's whole height, at x on its own x axis."""
    suffix = "" if panel == 1 else str(panel)
    return dict(type="line", x0=x, x1=x, xref=f"x{suffix}", y0=0, y1=1,
                yref=f"y{suffix} domain", line=line)


def utilisation_distribution(histogram: pd.DataFrame, percentiles: pd.DataFrame,
                             cumulative: bool, of: str = "run utilisation",
                             axis: str = "utilisation (elapsed / budget; the wine line is the "
                                         "budget)") -> go.Figure:
    """Run utilisation, one small panel per agent on a shared axis: a histogram (or its
    cumulative distribution) with that agent's p50/p90/p99 marked (from the utilisation report,
    not recomputed here). One panel each keeps four agents and their twelve lines readable.
    Histogram bars carry (agent, bin start, bin end) for a click to open the runs behind them."""
    title = (f"Cumulative distribution of {of}" if cumulative
             else f"{of[0].upper()}{of[1:]} histogram")
    groups = list(histogram.groupby("agent", dropna=False, sort=True))
    names = [fmt.plot_text(agent if not fmt.missing(agent) else "(no agent)")
             for agent, _ in groups]
    figure = make_subplots(rows=max(1, len(groups)), cols=1, shared_xaxes=True,
                           vertical_spacing=0.06 if len(groups) > 1 else 0.0,
                           subplot_titles=names or None)
    figure.update_layout(title=dict(text=title), **_LAYOUT,
                         height=max(320, 90 + 170 * len(groups)), barmode="overlay",
                         showlegend=True)
    by_agent = {str(row["agent"]): row for _, row in percentiles.iterrows()}
    lines: list[dict[str, object]] = []
    for i, ((agent, rows), name) in enumerate(zip(groups, names, strict=True), start=1):
        color = colors.SERIES[(i - 1) % len(colors.SERIES)]
        if cumulative:
            total = rows["runs"].sum()
            figure.add_scatter(x=rows["bin_end"], y=rows["runs"].cumsum() / total, name=name,
                               mode="lines", line=dict(color=color, shape="hv"), row=i, col=1,
                               hovertemplate=name + ": %{y:.1%} of runs at or below "
                                             "%{x:.0%}<extra></extra>")
        else:
            agent_text = "" if fmt.missing(agent) else str(agent)
            figure.add_bar(x=(rows["bin_start"] + rows["bin_end"]) / 2, y=rows["runs"],
                           width=(rows["bin_end"] - rows["bin_start"]).to_numpy(), name=name,
                           marker_color=color, row=i, col=1,
                           customdata=np.stack([[agent_text] * len(rows), rows["bin_start"],
                                                rows["bin_end"]], axis=-1),
                           hovertemplate=name + ": %{y} runs at %{customdata[1]:.0%}–"
                                         "%{customdata[2]:.0%} of the budget<extra></extra>")
        row = by_agent.get(str(agent))
        for p in ("p50", "p90", "p99"):
            if row is not None and not fmt.missing(row[p]):
                lines.append(_panel_vline(i, float(row[p]), dict(
                    color=colors.PERCENTILE_COLORS[p], **PERCENTILE_LINES[p])))
        lines.append(_panel_vline(i, 1.0, dict(color=colors.BUDGET, width=2)))
        figure.update_yaxes(title_text="share ≤ x" if cumulative else "runs",
                            tickformat=".0%" if cumulative else None, row=i, col=1)
    figure.update_xaxes(tickformat=".0%", row=max(1, len(groups)), col=1, title_text=axis)
    # All at once: add_vline(row=…) re-validates every shape already there and scans every
    # trace for its panel, so four agents' sixteen lines cost ~2 s on a first visit.
    figure.update_layout(shapes=lines)
    for p in ("p50", "p90", "p99"):  # legend entries for the percentile lines
        figure.add_scatter(x=[None], y=[None], mode="lines", name=p,
                           line=dict(color=colors.PERCENTILE_COLORS[p], **PERCENTILE_LINES[p]))
    return figure


def step_utilisation(steps: pd.DataFrame) -> go.Figure:
    """Step duration / allocation per step key: p50, p90, p95, p99 and max against 100%."""
    rows = steps.sort_values("p99").reset_index(drop=True)
    figure = _figure("Step utilisation against allocation (duration / budget.allocated_ms)",
                     xaxis=dict(title="of the allocation", tickformat=".0%"),
                     height=max(300, 60 + 30 * len(rows)), barmode="overlay")
    names = labels(rows["step_key"])
    for column, color, symbol in (("p50", colors.PERCENTILE_COLORS["p50"], "diamond"),
                                  ("p90", colors.PERCENTILE_COLORS["p90"], "square"),
                                  ("p95", colors.P95, "diamond-open"),
                                  ("p99", colors.PERCENTILE_COLORS["p99"], "diamond")):
        figure.add_scatter(x=rows[column], y=names, mode="markers", name=column,
                           marker=dict(color=color, size=10, symbol=symbol),
                           customdata=rows["steps"],
                           hovertemplate=f"step key %{{y}}<br>{column} %{{x:.1%}} of the "
                                         "allocation over %{customdata:,} steps"
                                         "<extra></extra>")
    figure.add_scatter(x=rows["max"], y=names, mode="markers", name="max",
                       marker=dict(color=colors.CAP, size=7, symbol="x"),
                       customdata=rows["steps"],
                       hovertemplate="step key %{y}<br>max %{x:.1%} of the allocation over "
                                     "%{customdata:,} steps<extra></extra>")
    figure.add_vline(x=1.0, line=dict(color=colors.BUDGET, width=2),
                     annotation_text="allocation")
    return figure


# ---- reconciliation ----------------------------------------------------------------------

def reconciliation_over_time(by_period: pd.DataFrame, threshold: float,
                             bucket: str = "week") -> go.Figure:
    """Reconciliation rate per week, or per day on a short range (`bucket`), over all write
    steps and per write step key, with the threshold. `by_period` has a row per day and key."""
    counts = ["write_steps", "reconciled_writes", "orphan_writes"]
    per_key = by_period.groupby([bucket, "step_key"], sort=True)[counts].sum().reset_index()
    per_key["reconciliation_rate"] = per_key["reconciled_writes"] / per_key["write_steps"]
    weekly = by_period.groupby(bucket, sort=True)[counts].sum().reset_index()
    weekly["rate"] = weekly["reconciled_writes"] / weekly["write_steps"]
    figure = _figure(f"Reconciliation rate per {bucket}",
                     yaxis=dict(tickformat=".0%", title="reconciled / writes",
                                rangemode="tozero"),
                     xaxis=dict(type="category"))
    by_period = per_key.rename(columns={bucket: "week"})
    weekly = weekly.rename(columns={bucket: "week"})
    figure.add_scatter(x=weekly["week"], y=weekly["rate"], mode="lines+markers",
                       name="all write steps", line=dict(color=colors.ALL_WRITES, width=3),
                       customdata=weekly[["reconciled_writes", "write_steps"]].to_numpy(),
                       hovertemplate="%{x}, all write steps<br>reconciliation rate %{y:.1%}: "
                                     "%{customdata[0]:,} of %{customdata[1]:,} writes"
                                     "<extra></extra>")
    for i, (key, rows) in enumerate(by_period.groupby("step_key", sort=True)):
        figure.add_scatter(x=rows["week"], y=rows["reconciliation_rate"], mode="lines+markers",
                           name=fmt.plot_text(key),
                           line=dict(color=colors.SERIES[i % len(colors.SERIES)], width=1.5),
                           customdata=rows[["reconciled_writes", "write_steps"]].to_numpy(),
                           hovertemplate=f"%{{x}}, step key {fmt.plot_text(key)}<br>"
                                         "reconciliation rate %{y:.1%}: %{customdata[0]:,} of "
                                         "%{customdata[1]:,} writes<extra></extra>")
    figure.add_hline(y=threshold, line=dict(color=colors.THRESHOLD, dash="dash"),
                     annotation_text=f"threshold {threshold:.0%}")
    return figure


def reconciliation_by_tool(report: pd.DataFrame) -> go.Figure:
    """Per write step key: reconciled writes by latest result, plus the orphans."""
    rows = report.iloc[::-1]
    figure = _figure("Writes by tool: read back (landed / not landed / unknown) or orphaned",
                     barmode="stack", xaxis=dict(title="write steps"),
                     height=max(280, 80 + 34 * len(rows)))
    for column in ("landed", "not_landed", "unknown"):
        figure.add_bar(y=labels(rows["step_key"]), x=rows[column], orientation="h",
                       name=column.replace("_", " "),
                       marker_color=colors.RECONCILE_COLORS[column],
                       customdata=rows["write_steps"],
                       hovertemplate=f"step key %{{y}}<br>read back, {column.replace('_', ' ')}"
                                     ": %{x:,} of %{customdata:,} write steps<extra></extra>")
    figure.add_bar(y=labels(rows["step_key"]), x=rows["orphan_writes"], orientation="h",
                   name="orphan (uncertain, never read back)",
                   marker_color=colors.RECONCILE_COLORS["orphan"],
                   customdata=rows["write_steps"],
                   hovertemplate="step key %{y}<br>orphans (uncertain, never read back): "
                                 "%{x:,} of %{customdata:,} write steps<extra></extra>")
    return figure
