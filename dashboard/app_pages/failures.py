"""Failures: client give-ups, upstream failures, refused, cancelled and errors per step key and
over time (never one "errors" bar, docs/metrics.md §3); each tool's latency against its cap."""

from __future__ import annotations

import streamlit as st

from dashboard import colors, columns, data, drill, figures, fmt, notices, page_context, tables
from dashboard.exports import csv_file_name
from dashboard.metrics import Metric, headline
from queries.render import to_csv_bytes

ctx = page_context.current()
st.title("Failures")
st.caption(fmt.escape_md(ctx.state.label(ctx.now)) + " · every step of the runs in range, "
           "nested ones included, by class (docs/metrics.md §3).")
if notices.no_runs_in_range(ctx):
    st.stop()

failures = data.report("failures", ctx.filters)
totals = failures[list(colors.FAILURE_COLUMNS)].sum()


def _label(name: str) -> str:
    cls = colors.FAILURE_COLUMNS[name]
    if cls in ("client_timeout", "upstream_error"):
        return colors.CLASS_LABELS[cls].split(" (")[0].capitalize() + "s"
    return colors.CLASS_LABELS[cls].capitalize()


headline([Metric(_label(name), fmt.count(totals[name]))
          for name in ("client_timeouts", "upstream_errors", "refused", "cancelled",
                       "client_errors", "errors")], key="failures_headline")
st.caption(f"{fmt.plural(int(totals.sum()), 'step')} in all, {fmt.count(totals['ok'])} ok. Client "
           "give-ups: our deadline fired (our configuration). Upstream failures: 5xx, 429, "
           "UNAVAILABLE… (their availability).")

as_rate = st.toggle("As a share of each step key's steps", key="failures_as_rate",
                    help="Rates compare step keys with different traffic; counts say how many.")
drill.chart(figures.failures_by_step(failures, top=len(failures), as_rate=as_rate),
            "failures_by_step", drill.failing_runs)
st.caption("One bar per class, side by side: client give-ups and upstream failures never share "
           "a bar. Click a bar to list the runs holding such a step.")

daily = data.report("failures_daily", ctx.filters)
st.plotly_chart(figures.class_counts_over_time(daily, "day", "Failed steps per day"),
                key="failures_over_time")
st.caption("Per day, each class is a bar of its own beside the others, never a segment of one.")

st.subheader("Tool latency against its cap")
latency = data.report("tool_latency", ctx.filters)
tools = sorted(latency["step_key"].unique())
tool = st.selectbox("Tool", tools, key="latency_tool") if tools else None
if tool:
    st.plotly_chart(figures.latency_against_cap(latency[latency["step_key"] == tool], tool),
                    key="tool_latency")
else:
    st.info("No tool calls in this range.")

st.subheader("Failures table")
st.download_button("Download CSV", to_csv_bytes(failures), key="failures_csv",
                   file_name=csv_file_name("failures", ctx.filters), mime="text/csv",
                   on_click="ignore")
tables.table(failures, hide_index=True, key="failures_table",
             height=tables.table_height(len(failures)),
             column_config=columns.config("failures", failures.columns))
