"""Run view (on-call): one run, opened by `?run=<run_id>` or from any list."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import colors, data, fmt, layout, run_figures, summaries
from queries import run_story
from queries.run_view import RunNotFound

ctx = layout.context()
st.title("Run view")

url_run = st.query_params.get("run", "")
if url_run:
    st.session_state["last_run"] = url_run
run_id = url_run or st.session_state.get("last_run", "")

typed = st.text_input("Run id", value=run_id, placeholder="trace id, or trace_id/span_id",
                      help="Paste a run id from a report, a log line or a chat link.").strip()
if typed and typed != run_id:
    st.session_state["last_run"] = typed
    st.query_params["run"] = typed
    st.rerun()

if not run_id:
    st.info("Open a run from a list on any page, paste its id above, or pick a recent "
            "exhausted run in the current filters:")
    picks = summaries.runs_worth_reviewing(data.report("runs", ctx.filters), limit=50)
    if picks.empty:
        st.caption("No runs in the current filters.")
    else:
        chosen = st.selectbox("Runs worth reviewing", picks["run_id"], index=None,
                              key="run_pick", format_func=summaries.describe_run(picks))
        if chosen:
            st.query_params["run"] = chosen
            st.session_state["last_run"] = chosen
            st.rerun()
    st.stop()

layout.write_url(ctx.state, {"run": run_id})
try:
    view = data.run_view(run_id)
except RunNotFound as error:
    st.error(fmt.escape_md(str(error)))
    st.stop()

run = view.summary
exhausted = run["exhausted"]
st.subheader(fmt.escape_md(f"{run['run_id']}"))
st.caption(fmt.escape_md(f"agent {run['agent'] if not fmt.missing(run['agent']) else '–'} · "
                         f"started {fmt.timestamp_ns(run['start_ns'])}"))

story = run_story.tell(run)
outcome = run["outcome"]
# A stated outcome outside SPEC's list is span data: show it escaped below, not in a metric.
known = outcome in run_story.STATED_OUTCOMES
# Two rows of three: a tile a sixth of the page wide cut "1 m 12.4 s" to "1 min …".
first, second = st.columns(3), st.columns(3)
first[0].metric("Outcome", outcome if known else (fmt.NO_VALUE if fmt.missing(outcome)
                                                   else "other"),
                help="budget.run.outcome as the agent stated it")
first[1].metric("Exhausted", fmt.NO_VALUE if fmt.missing(exhausted)
                else ("yes" if exhausted else "no"), help=story.exhausted_reason or None)
first[2].metric("Utilisation", fmt.percent(run["utilisation"]))
source = run.get("budget_source")
second[0].metric("Budget", fmt.duration(run["budget_ms"]),
                 help={"span": "from the run's own budget.total_ms",
                       "declared": "declared for this run's agent, or the default for agents "
                                   "without one (Budgets page; SPEC §10)"}.get(
                     source, "unknown: no budget.total_ms and no budget declared"))
second[1].metric("Elapsed", fmt.duration(run["elapsed_ms"]))
second[2].metric("Overrun", fmt.duration(run["overrun_ms"]))

if fmt.missing(run["budget_ms"]):
    st.warning(story.ending + " (docs/metrics.md §1) Declare one on the Budgets page or with "
               "`budgetscope budgets set AGENT DURATION`.")
else:
    st.caption("Budget source: " + ("**declared** (its agent's declared budget, or the "
                                    "default; not the run's own)" if source == "declared"
                                    else "**span** (the run's own budget.total_ms)"))
    st.markdown(
        f"{story.ending} {story.exhausted_reason}  \n"
        f"**Culprit** (spent the most): {fmt.escape_md(run['culprit_key'])} — "
        f"{fmt.percent(run['culprit_share'])} of the budget, {fmt.duration(run['culprit_ms'])}  \n"
        f"**Holder** ({story.holder_role}): {fmt.escape_md(run['holder_key'])}"
        + (f"  \n⚠️ The {story.culprit_note}." if story.culprit_note else "")
        + f"  \n**Unattributed**: {fmt.duration(run['unattributed_ms'])} "
          "(time with no step running)")

# The link is a code block (its copy button) inside a popover: Streamlit draws a popover's
# content only once it is opened, and a code block on the page made every first visit fetch
# and compile the 1.5 MB syntax-highlighting bundle beside the charts' Plotly.
with st.popover("Link to this view", icon=":material/link:",
                help="The address of this run with the current filters, to paste into a chat"):
    st.code(layout.run_url(str(run["run_id"]), ctx.state), language=None, wrap_lines=True)
st.page_link(layout.COMPARE_PAGE, label="Compare with a typical run of this agent",
             icon=":material/compare_arrows:",
             query_params=layout.run_params(str(run["run_id"]), ctx.state),
             help="Side by side with the median-utilisation completed run of the same agent in "
                  "the filter's period (or one you pick there): step by step, where the time "
                  "went differently.")

if view.steps.empty:
    st.info("This run has no steps.")
else:
    st.plotly_chart(run_figures.waterfall(run, view.steps), key="waterfall")
    counts = view.steps["step_class"].value_counts()
    st.caption(fmt.escape_md("Steps by class: " + " · ".join(
        f"{colors.CLASS_LABELS[name]} {int(counts.get(name, 0))}"
        for name in colors.STEP_CLASSES if counts.get(name, 0))))
    st.subheader("Steps")
    table = summaries.run_steps_table(view.steps, run)
    # What on-call reads first fits the page at 1400 px without a horizontal scroll; what
    # recognised each step, the write fields and the span ids are one click away, below.
    height = min(38 + 35 * len(view.steps), 740)
    layout.table(table, hide_index=True, key="steps_table", height=height,
                 column_order=["#", "step", "class", "role", "start", "duration", "share",
                               "allocated", "utilisation"],
                 column_config={
                     # Fixed widths: the grid sizes a column by its first rows, so a class or
                     # role further down ("upstream_error", "culprit + holder") was cut.
                     "class": st.column_config.TextColumn("class", width=120),
                     "role": st.column_config.TextColumn("role", width=120),
                     "share": st.column_config.ProgressColumn(
                         "share", help="consumption / budget (docs/metrics.md §4)",
                         format="%.1f%%", min_value=0.0, max_value=100.0),
                     "utilisation": st.column_config.TextColumn(
                         "utilisation", help="duration / allocated (docs/metrics.md §5)")})
    with st.expander("Step details: what recognised each step, write fields, span ids"):
        layout.table(table, hide_index=True, key="steps_details_table", height=height,
                     column_order=["#", "step", "from", "effect status", "idempotency key",
                                   "attempt", "span id"],
                     column_config={"from": st.column_config.TextColumn(
                         "recognised from", help="the convention that made it a step "
                         "(docs/conventions.md)")})

st.subheader("Writes")
if view.writes.empty:
    st.caption("No write steps in this run.")
else:
    writes = view.writes
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Write steps", len(writes))
    c2.metric("Uncertain", int(writes["is_uncertain"].sum()))
    c3.metric("Reconciled", int(writes["reconciled"].sum()))
    c4.metric("Orphans", int(writes["orphan"].sum()))
    layout.table(pd.DataFrame({
        "step": writes["step_key"], "class": writes["step_class"],
        "effect status": writes["effect_status"].map(fmt.text),
        "idempotency key": writes["idempotency_key"].map(fmt.text),
        "attempt": writes["attempt"], "uncertain": writes["is_uncertain"],
        "reconciliations": writes["reconciliations"],
        "last result": writes["last_result"].map(fmt.text),
        "orphan": writes["orphan"], "at": writes["offset_ms"].map(lambda v: f"+{fmt.duration(v)}"),
    }), hide_index=True, key="writes_table")

st.subheader("Log records")
if view.log_records.empty:
    st.caption("No OTLP log records for this run's trace.")
else:
    more = len(view.log_records) > summaries.LOG_RECORDS_SHOWN
    st.caption(fmt.escape_md(
        f"The first {summaries.LOG_RECORDS_SHOWN} log records of this run's trace, by time"
        if more else f"{len(view.log_records)} log record(s) of this run's trace, by time")
        + " (a record with exception.type counts as its span's exception, SPEC §9).")
    layout.table(summaries.run_log_table(view.log_records, run), hide_index=True,
                 key="log_records_table")
