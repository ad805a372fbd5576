"""The comparison view's chart: consumption per step key in the run under review and in the run
it is compared with, side by side (never stacked: they are two runs, not parts of one)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from dashboard import colors, fmt


def _hover_rows(table: pd.DataFrame, side: str) -> list[list[str]]:
    return [[fmt.plot_text(key), fmt.count(steps), fmt.duration(consumed), fmt.duration(spent)]
            for key, steps, consumed, spent in zip(
                table["step_key"], table[f"steps_{side}"], table[f"consumption_ms_{side}"],
                table[f"duration_ms_{side}"], strict=True)]


def consumption_by_key(by_key: pd.DataFrame, run_label: str, other_label: str) -> go.Figure:
    """One pair of horizontal bars per step key (the largest difference on top), in seconds."""
    shown = by_key.iloc[::-1]  # Plotly draws the first category at the bottom
    keys = [fmt.plot_text(key) for key in shown["step_key"]]
    figure = go.Figure()
    for side, label, colour in (("other", other_label, colors.COMPARE),
                                ("run", run_label, colors.NEUTRAL)):
        figure.add_bar(
            y=keys, x=shown[f"consumption_ms_{side}"] / 1000, orientation="h",
            name=fmt.plot_text(label), marker_color=colour,
            customdata=_hover_rows(shown, side),
            hovertemplate=(f"<b>{fmt.plot_text(label)}</b><br>step key %{{customdata[0]}}<br>"
                           "%{customdata[1]} step(s)<br>consumption %{customdata[2]}<br>"
                           "duration %{customdata[3]}<extra></extra>"))
    figure.update_layout(
        title="Consumption per step key", barmode="group",
        height=max(280, 90 + 44 * len(shown)),
        margin={"l": 10, "r": 10, "t": 60, "b": 40},
        legend={"orientation": "h", "y": 1.02, "x": 0, "yanchor": "bottom",
                "traceorder": "reversed"},
        xaxis={"title": "consumption (s)", "ticksuffix": " s", "rangemode": "tozero"},
        yaxis={"automargin": True})
    return figure
