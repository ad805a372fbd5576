"""Pure Plotly builders for the What-if page: a simulation's frames in, Figure out (no
Streamlit). Actual is drawn in grey and predicted in colour on every chart, so the two read
the same way everywhere: amber where the predicted figure is calls cut at their cap (client
give-ups, whose colour it is), blue elsewhere; step keys come from spans and go through
fmt.plot_text."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard import colors, figures

ACTUAL_COLOR = colors.CLASS_COLORS["cancelled"]  # grey: what happened (bars)
ACTUAL_LINE = colors.COMPARE_LINE  # the same as a line, standing out in both themes
PREDICTED_COLOR = colors.CLASS_COLORS["client_timeout"]  # amber: give-ups under the policy
PREDICTED_OTHER = colors.LINE  # blue: any other predicted figure (utilisation, a line)
_LAYOUT = dict(margin=dict(l=10, r=10, t=40, b=100),
               legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0),
               hovermode="closest")


def timeout_rates(tools: pd.DataFrame) -> go.Figure:
    """Client timeout rate per step key, actual beside predicted (steps with calls only)."""
    title = "Client timeout rate per step: actual vs predicted"
    shown = tools[(tools["calls_actual"] > 0) | (tools["calls"] > 0)]
    if shown.empty:
        return figures.empty(title, "No calls in this range.")
    figure = go.Figure()
    figure.update_layout(title=dict(text=title), barmode="group",
                         xaxis=dict(title="client timeouts / calls", **figures.rate_axis(
                             float(shown[["timeout_rate_actual", "timeout_rate"]].max().max()))),
                         yaxis=dict(autorange="reversed"), height=140 + 28 * len(shown),
                         **_LAYOUT)
    keys = figures.labels(shown["step_key"])
    figure.add_bar(y=keys, x=shown["timeout_rate_actual"], name="actual", orientation="h",
                   marker_color=ACTUAL_COLOR,
                   customdata=np.stack([shown["timeouts_actual"], shown["calls_actual"]],
                                       axis=-1),
                   hovertemplate="step key %{y}<br>client timeout rate %{x:.1%}: "
                                 "%{customdata[0]:,} of %{customdata[1]:,} calls"
                                 "<extra>actual</extra>")
    figure.add_bar(y=keys, x=shown["timeout_rate"], name="predicted", orientation="h",
                   marker_color=PREDICTED_COLOR,
                   marker_pattern_shape=np.where(shown["rests_on_fit"], "/", ""),
                   customdata=np.stack([shown["timeouts"], shown["calls"],
                                        shown["fit_calls"]], axis=-1),
                   hovertemplate="step key %{y}<br>client timeout rate %{x:.1%}: "
                                 "%{customdata[0]:,} of %{customdata[1]:,} calls<br>"
                                 "%{customdata[2]:,} of them rest on the latency fit"
                                 "<extra>predicted</extra>")
    return figure


# Where the cumulative distribution keeps a point: once per 0.1 percentage point of
# utilisation, a pixel or less of the chart's width at 1400 px. Every run a point sent 2.2 MB of
# figure for 35,000 runs (What if over all time), all of it drawn by the browser.
CDF_RESOLUTION = 0.001


def cdf_points(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The empirical CDF of `values` (sorted, no NaN) as (value, share at or below, count at
    or below), thinned to the lowest and the highest value of every CDF_RESOLUTION-wide bin:
    each point kept is exact (ties counted), and drawn as steps ('hv') the curve is nowhere
    off by more than a bin's width."""
    bins = np.floor(values / CDF_RESOLUTION)
    changes = bins[1:] != bins[:-1]
    kept = np.append(changes, True) | np.insert(changes, 0, True)
    x = np.unique(values[kept])
    counts = np.searchsorted(values, x, side="right")
    return x, counts / max(len(values), 1), counts


def utilisation_cdf(runs: pd.DataFrame, budget_line: bool = True) -> go.Figure:
    """Share of runs at or below each utilisation, actual and predicted."""
    title = "Run utilisation: actual vs predicted"
    if runs.empty:
        return figures.empty(title, "No runs with a budget in this range.")
    figure = go.Figure()
    figure.update_layout(title=dict(text=title),
                         xaxis=dict(tickformat=".0%", dtick=0.1, title="elapsed / budget"),
                         yaxis=dict(tickformat=".0%", dtick=0.2, title="runs at or below",
                                    range=[0, 1]),
                         **_LAYOUT)
    for column, name, color in (("utilisation_actual", "actual", ACTUAL_LINE),
                                ("utilisation", "predicted", PREDICTED_OTHER)):
        values = np.sort(runs[column].dropna().to_numpy(dtype=float))
        x, share, count = cdf_points(values)
        figure.add_scatter(x=x, y=share, name=name, mode="lines",
                           line=dict(color=color, shape="hv"), customdata=count,
                           hovertemplate=f"{name}: %{{y:.1%}} of {len(values):,} runs "
                                         "(%{customdata:,}) at or below utilisation "
                                         "%{x:.1%}<extra></extra>")
    if budget_line:
        figure.add_vline(x=1.0, line=dict(color=colors.BUDGET, width=1))
    return figure
