"""Weekly report: the docs/metrics.md §7 table, and its CSV, byte for byte what `budgetscope report
weekly` writes for the same filters (both call queries.render.to_csv_bytes on
queries.reports.weekly)."""

from __future__ import annotations

import streamlit as st

from dashboard import columns, data, fmt, page_context, tables, weekly_summaries
from dashboard.exports import cli_command, csv_file_name
from dashboard.filters import FULL_WEEKS
from queries.filters import Filters
from queries.render import to_csv_bytes

ctx = page_context.current()
st.title("Weekly report")
st.caption("One row per ISO week (UTC, weeks start Monday) × agent, for runs that started in "
           + fmt.escape_md(ctx.state.label(ctx.now))
           + ". Percentages here; the CSV keeps rates as fractions in [0, 1], with empty "
           "cells where a value is undefined (nothing to divide by). Hover a column's name "
           "for what it counts: “runs (all)” is every run, the exhaustion rate divides by "
           "the runs with a known budget only.")

weekly = data.report("weekly", ctx.filters)
st.download_button("Download CSV", data=to_csv_bytes(weekly),
                   file_name=csv_file_name("weekly", ctx.filters), mime="text/csv",
                   icon=":material/download:", key="weekly_csv", on_click="ignore")
# A code block (its copy button) inside a popover, drawn only once opened: on the page it made
# every first visit fetch and compile the 1.5 MB syntax-highlighting bundle for one line.
with st.popover("The same bytes from the command line", icon=":material/terminal:"):
    st.code(cli_command("weekly", ctx.filters, ctx.status.path), language="bash",
            wrap_lines=True)

def _show_full_weeks() -> None:
    st.session_state["f_range"] = "4w"


partial = weekly.loc[weekly["partial_week"].fillna(False).astype(bool), "week"].unique()
if len(partial):
    st.info("Partial weeks (`partial_week` true): " + ", ".join(sorted(partial))
            + ". The time range or the present cuts them short, so their counts are not the "
            "whole week's.")
    if ctx.state.preset not in FULL_WEEKS:
        st.button("Show the last 4 full weeks", on_click=_show_full_weeks,
                  key="weekly_full_weeks")

if weekly.empty:
    st.info("No runs in this range.")
else:
    # Two tables of about ten columns each, so that neither is cut on the right at 1400 px:
    # who reads the runs side (exhaustion, utilisation, the largest share) is often not who
    # reads the steps and writes side. Each week opens with its row over all agents, then its
    # agents' rows (the CSV above keeps the report's own rows); the week names its days, and
    # a week the range cuts short says so and which days it counts, in both tables.
    shown = weekly_summaries.weekly_with_all_agents(
        weekly, data.report("runs", ctx.filters),
        lambda start, end: data.report("attribution", Filters(start, end, ctx.filters.agent)),
        ctx.filters.since, ctx.filters.until, data.report("cost", ctx.filters),
        lambda start, end: data.report("cost_attribution",
                                       Filters(start, end, ctx.filters.agent)))
    shown["week"] = [weekly_summaries.week_label(str(week), bool(partial), ctx.filters.since,
                                                 ctx.filters.until)
                     for week, partial in zip(shown["week"], shown["partial_week"].fillna(False),
                                              strict=True)]
    height = tables.table_height(len(shown), most=60)
    labels = {**columns.config("weekly", weekly.columns),
              "week": st.column_config.TextColumn(
                  "week", help="ISO week (UTC, Monday to Sunday) and its days; "
                  f"{weekly_summaries.PARTIAL_MARK} a partial week: the time range or the "
                  "present cuts it short, and the days are those it counts (partial_week in "
                  "the CSV)")}
    if len(partial):
        st.caption(fmt.escape_md(weekly_summaries.PARTIAL_MARK) + " after a week: a partial "
                   "week, whose days are those the time range counts, not the whole week.")
    st.subheader("Runs")
    tables.table(fmt.readable_table(shown), hide_index=True, key="weekly_table",
                 height=height, column_config=labels,
                 column_order=["week", "agent", "runs", "budgeted_runs", "exhausted_runs",
                               "exhaustion_rate", "utilisation_p50", "utilisation_p90",
                               "utilisation_p99", "top_culprit", "top_culprit_share"])
    st.subheader("Steps and writes")
    tables.table(fmt.readable_table(shown), hide_index=True, key="weekly_steps_table",
                 height=height, column_config=labels,
                 column_order=["week", "agent", "steps", "client_timeouts",
                               "upstream_errors", "refused", "write_steps", "reconciled_writes",
                               "reconciliation_rate", "orphan_writes"])
    # Tokens and dollars (docs/metrics.md §11.9): the columns the CSV appends after
    # partial_week, in tables of their own of at most ten columns, so that none is cut at
    # 1400 px (thirteen budget columns in one table were 1241 px in a 938 px box).
    st.subheader("Spend")
    tables.table(fmt.readable_table(shown), hide_index=True, key="weekly_spend_table",
                 height=height, column_config=labels,
                 column_order=["week", "agent", "tokens", "cost_usd", "incomplete_cost_runs",
                               "unpriced_steps", "unmetered_billable_steps", "overrun_usd",
                               "weekly_budget_usd", "weekly_budget_utilisation"])
    st.subheader("Dollar budgets")
    tables.table(fmt.readable_table(shown), hide_index=True, key="weekly_cost_budget_table",
                 height=height, column_config=labels,
                 column_order=["week", "agent", "usd_budgeted_runs", "usd_exhausted_runs",
                               "usd_exhaustion_rate", "cost_utilisation_p50",
                               "cost_utilisation_p90", "cost_utilisation_p99",
                               "top_cost_culprit", "top_cost_culprit_share"])
    st.subheader("Token budgets")
    tables.table(fmt.readable_table(shown), hide_index=True, key="weekly_token_budget_table",
                 height=height, column_config=labels,
                 column_order=["week", "agent", "token_budgeted_runs", "token_exhausted_runs",
                               "token_utilisation_p90"])
