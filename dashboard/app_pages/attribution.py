"""Attribution: who spent the budget of exhausted runs (docs/metrics.md §4), how often that is
not the step holding the deadline, and exhausted vs completed runs side by side."""

from __future__ import annotations

import streamlit as st

from dashboard import (
    attribution_summaries,
    columns,
    data,
    drill,
    figures,
    fmt,
    links,
    notices,
    page_context,
    summaries,
    tables,
)
from dashboard.exports import csv_file_name
from dashboard.metrics import Metric, headline
from queries.render import to_csv_bytes

ctx = page_context.current()
st.title("Attribution")
st.caption(fmt.escape_md(ctx.state.label(ctx.now)) + " · exhausted runs only; a step's share "
           "is its consumption (wall clock split fairly among parallel steps) over the runs' "
           "budgets.")
if notices.no_runs_in_range(ctx):
    st.stop()

summary = data.report("attribution_summary", ctx.filters).iloc[0]
attribution = data.report("attribution", ctx.filters)
runs = data.report("runs", ctx.filters)
matrix = attribution_summaries.holder_culprit(runs)
rate = summary["culprit_is_holder_rate"]


# The same call, another call of the same step, another step: one whole, shown adding up.
same_call, other_call, other_step = fmt.percents_adding_up(
    [matrix.same_call, matrix.same_key - matrix.same_call, matrix.runs - matrix.same_key]) \
    if matrix.runs else [fmt.NO_VALUE] * 3
# Culprit and holder are steps (docs/metrics.md §4): the holder is the culprit itself, another
# call of the culprit's step key, or another step. The three add up to the runs with both.
headline([
    Metric("Exhausted runs", fmt.count(summary["exhausted_runs"])),
    Metric("Culprit is the holder", same_call,
           help="Exhausted runs whose holder is the culprit itself: the same call "
                "(culprit_is_holder_rate, docs/metrics.md §4)."),
    Metric("Another call, same step", other_call,
           help="The holder has the culprit's step key but is another call of it (#3 and #9 "
                "of tool:fetch_report): on the matrix's diagonal, yet not the culprit."),
    Metric("Another step", other_step,
           help="Another step key held the deadline: off the matrix's diagonal."),
    Metric("Unattributed", fmt.percent(summary["unattributed_share"]),
           help="Time with no step running (harness, gaps) over the budgets."),
], key="attribution_headline")

if attribution.empty:
    st.info("No exhausted runs in this range.")
    st.stop()

drill.chart(figures.culprits(attribution, top=15,
                             title="Budget share per step key (exhausted runs)"),
            "attribution_share", drill.culprit_runs)
st.caption("Click a bar to list the exhausted runs it is the culprit of, or a cell of the "
           "matrix below for the runs with that holder and culprit.")

if matrix.keys:
    drill.chart(figures.holder_culprit_matrix(matrix.keys, matrix.cells), "holder_culprit",
                drill.holder_culprit_runs)
    st.caption(fmt.escape_md(
        f"On the dotted diagonal the holder has the culprit's step key: "
        f"{matrix.same_key:,} of {fmt.plural(matrix.runs, 'run')}, of which "
        f"{matrix.same_call:,} the same "
        "call and the rest another call of the same step. Off it, another step held the "
        "deadline. Click a cell to list its runs on the Runs page. Keys beyond the ten most "
        "frequent are grouped as (other)."))

completed = data.report("attribution_completed", ctx.filters)
sides = attribution[["step_key", "budget_share"]].rename(
    columns={"budget_share": "exhausted"}).merge(
    completed[["step_key", "budget_share"]].rename(columns={"budget_share": "completed"}),
    on="step_key", how="outer").fillna(0.0).sort_values("exhausted", ascending=False)
st.plotly_chart(figures.share_side_by_side(sides.head(15)), key="side_by_side")

st.subheader("Exhausted runs by culprit")
key = st.selectbox("Culprit step key", attribution["step_key"], key="culprit_pick")
blamed = attribution_summaries.exhausted_runs_of(runs, key)
# Text with the one "no value" mark (Streamlit shows a missing value as "None")
tables.table(fmt.readable_table(blamed.assign(outcome=blamed["outcome"].map(fmt.text),
                                            start=blamed["start"].map(fmt.instant))),
             hide_index=True, key="culprit_runs_table", height=tables.table_height(len(blamed)),
             column_config={"run_id": st.column_config.TextColumn("run id"),
                            "start": st.column_config.TextColumn("start (UTC)"),
                            "culprit": st.column_config.TextColumn(
                                "culprit", width=70, help="the culprit's number among the "
                                "run's steps (docs/metrics.md §4); its key is the one chosen "
                                "above"),
                            "culprit_share": st.column_config.TextColumn(
                                "culprit share", help="the culprit's consumption / the budget"),
                            "holder": st.column_config.TextColumn(
                                "holder", help="held the deadline; the same number as the "
                                "culprit: the same call")})
if not blamed.empty:
    pick = st.selectbox("Open a run", blamed["run_id"], key="culprit_run_pick",
                        format_func=summaries.describe_run(blamed, exhausted_only=True))
    links.run_link(pick, ctx.state, label="Open this run")

st.subheader("Attribution table")
st.download_button("Download CSV", to_csv_bytes(attribution), key="attribution_csv",
                   file_name=csv_file_name("attribution", ctx.filters), mime="text/csv",
                   on_click="ignore")
tables.table(fmt.readable_table(attribution), hide_index=True, key="attribution_table",
             height=tables.table_height(len(attribution)),
             column_config=columns.config("attribution", attribution.columns))
