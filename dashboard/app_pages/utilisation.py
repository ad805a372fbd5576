"""Utilisation: is the deadline binding? The distribution of run utilisation per agent, with
p50/p90/p99 marked, and step utilisation against allocation (docs/metrics.md §5)."""

from __future__ import annotations

import streamlit as st

from dashboard import columns, data, drill, figures, fmt, notices, page_context, tables

ctx = page_context.current()
st.title("Utilisation")
st.caption(fmt.escape_md(ctx.state.label(ctx.now)) + " · run utilisation = elapsed / budget "
           "(above 100%: the run overran); runs with a known budget.")
if notices.no_runs_in_range(ctx):
    st.stop()

percentiles = data.report("utilisation", ctx.filters)
histogram = data.report("utilisation_histogram", ctx.filters)
tables.table(fmt.readable_table(percentiles), hide_index=True, key="utilisation_table",
             height=tables.table_height(len(percentiles)),
             column_config=columns.config("utilisation", percentiles.columns))
if histogram.empty:
    st.info("No runs with a known budget in this range.")
else:
    hist_tab, cdf_tab = st.tabs(["Histogram", "Cumulative distribution"])
    with hist_tab:
        drill.chart(figures.utilisation_distribution(histogram, percentiles, False),
                    "utilisation_histogram", drill.utilisation_runs)
    with cdf_tab:
        st.plotly_chart(figures.utilisation_distribution(histogram, percentiles, True),
                        key="utilisation_cdf")
    st.caption("One panel per agent. Vertical lines: its p50 (dotted), p90 (dashed) and p99 "
               "(solid); the wine line is the budget. Click a bar to list its runs.")

st.subheader("Steps against their allocation")
steps = data.report("step_utilisation", ctx.filters)
if steps.empty:
    st.info("No steps carry budget.allocated_ms in this range.")
else:
    st.plotly_chart(figures.step_utilisation(steps), key="step_utilisation")
    tables.table(fmt.readable_table(steps), hide_index=True, key="step_utilisation_table",
                 height=tables.table_height(len(steps)),
                 column_config=columns.config("step_utilisation", steps.columns))
