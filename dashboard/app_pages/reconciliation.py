"""Reconciliation: what timeouts cost in correctness (docs/metrics.md §6). Rate over time against a
threshold, by tool, landed / not landed / unknown, and the orphan writes."""

from __future__ import annotations

import streamlit as st

from dashboard import columns, data, figures, fmt, links, notices, page_context, tables
from dashboard.exports import csv_file_name
from dashboard.metrics import Metric, headline
from queries.render import to_csv_bytes

# The rate chart is daily while the range's writes span at most this many days.
DAILY_UP_TO_DAYS = 35

ctx = page_context.current()
st.title("Reconciliation")
st.caption(fmt.escape_md(ctx.state.label(ctx.now)) + " · reconciliation rate = reconciled "
           "writes / write steps; an orphan is an uncertain write nobody read back.")
if notices.no_runs_in_range(ctx):
    st.stop()

report = data.report("reconciliation", ctx.filters)
if report.empty:
    st.info("No write steps (budget.side_effect = write) in this range.")
    st.stop()
writes = int(report["write_steps"].sum())
reconciled = int(report["reconciled_writes"].sum())
headline([
    Metric("Write steps", fmt.count(writes)),
    Metric("Uncertain writes", fmt.count(report["uncertain_writes"].sum())),
    Metric("Reconciled writes", fmt.count(reconciled)),
    Metric("Reconciliation rate", fmt.percent(reconciled / writes if writes else None)),
    Metric("Orphan writes", fmt.count(report["orphan_writes"].sum())),
], key="reconciliation_headline")

# In percent, as the chart and the tiles say the rate (a slider at 0.10 beside "10%" read as
# two different numbers).
threshold = st.slider("Threshold", 0, 100, 10, 1, key="reconcile_threshold", format="%d%%",
                      help="Drawn on the rate chart; weeks under it need a look.") / 100
by_period = data.report("reconciliation_by_period", ctx.filters)
# Days on a short range (a week or two read as one or two points per week), weeks beyond.
days = by_period["day"].nunique() if not by_period.empty else 0
st.plotly_chart(figures.reconciliation_over_time(
    by_period, threshold, "day" if days <= DAILY_UP_TO_DAYS else "week"),
    key="reconciliation_over_time")
st.plotly_chart(figures.reconciliation_by_tool(report), key="reconciliation_by_tool")

st.subheader("Orphan writes")
orphans = data.report("orphan_writes", ctx.filters)
st.download_button("Download CSV", to_csv_bytes(orphans), key="orphans_csv",
                   file_name=csv_file_name("orphan-writes", ctx.filters), mime="text/csv",
                   on_click="ignore")
tables.table(orphans.assign(start=orphans["start"].map(fmt.instant)), hide_index=True,
             key="orphans_table", height=tables.table_height(len(orphans)),
             column_config={"run_id": st.column_config.TextColumn("run id"),
                            "step_key": st.column_config.TextColumn("step key"),
                            "idempotency_key": st.column_config.TextColumn("idempotency key"),
                            "start": st.column_config.TextColumn("start (UTC)"),
                            "effect_status": st.column_config.TextColumn("effect status")},
             # the agent is on the run view: without it the table fits the page at 1400 px
             column_order=["run_id", "step_key", "idempotency_key", "start", "class",
                           "effect_status"])
if not orphans.empty:
    pick = st.selectbox("Open the run of an orphan write", orphans["run_id"].unique(),
                        key="orphan_pick")
    if pick:
        links.run_link(pick, ctx.state)

st.subheader("By tool")
st.download_button("Download CSV", to_csv_bytes(report), key="reconciliation_csv",
                   file_name=csv_file_name("reconciliation", ctx.filters), mime="text/csv",
                   on_click="ignore")
tables.table(fmt.readable_table(report), hide_index=True, key="reconciliation_table",
             height=tables.table_height(len(report)),
             column_config=columns.config("reconciliation", report.columns))
