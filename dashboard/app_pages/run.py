"""Run view (on-call): one run, opened by `?run=<run_id>` (or a unique start of one) or from
any list. Its first screen answers what on-call asks, in the words `budgetscope run` uses
(queries/run_story.py): what happened, who spent and who held (numbered), failures by class,
uncertain writes with their keys, and one next step drawn from the run's data."""

from __future__ import annotations

import shlex

import pandas as pd
import streamlit as st

from dashboard import (
    cost_figures,
    cost_summaries,
    data,
    fmt,
    links,
    page_context,
    run_figures,
    run_summaries,
    sidebar,
    summaries,
    tables,
)
from dashboard.metrics import Metric, headline
from queries import run_compare, run_cost, run_story
from queries.run_view import LOG_RECORDS_SHOWN, RunNotFound

SIMULATE_PAGE = "app_pages/simulate.py"
BUDGETS_PAGE = "app_pages/budgets.py"
COST_PAGE = "app_pages/cost.py"

ctx = page_context.current()
st.title("Run view")

url_run = st.query_params.get("run", "")
if url_run:
    st.session_state["last_run"] = url_run
run_id = url_run or st.session_state.get("last_run", "")

typed = st.text_input("Run id", value=run_id, placeholder="trace id, trace_id/span_id, or a "
                      "unique start of one",
                      help="Paste a run id from a report, a log line or a chat link; its first "
                           "characters are enough when no other run starts with them.").strip()
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

try:
    view = data.run_view(run_id)
except RunNotFound as error:
    sidebar.write_url(ctx.state, {"run": run_id})
    st.error(fmt.escape_md(str(error)))
    st.stop()

run = view.summary
if str(run["run_id"]) != run_id:  # a prefix: the address names the whole id from here on
    st.session_state["last_run"] = str(run["run_id"])
sidebar.write_url(ctx.state, {"run": str(run["run_id"])})
story = run_story.tell(run)
exhausted = run["exhausted"]
st.subheader(fmt.escape_md(f"{run['run_id']}"))
st.caption(fmt.escape_md(f"agent {run['agent'] if not fmt.missing(run['agent']) else '–'} · "
                         f"started {fmt.timestamp_ns(run['start_ns'])}"))
if bool(run.get("root_missing")):
    st.warning("The trace's root span never arrived: this run is measured from its earliest "
               "span (docs/conventions.md, a trace without its root).")

# ---- the summary block: the four answers and one next step, above the fold -------------------
box = st.container(border=True, key="run_summary")
box.markdown("  \n".join(f"**{label}:** {fmt.escape_md(text)}" for label, text in
                         run_story.answers(run, story, view.steps, view.writes)))
for note in run_story.uncertain_writes(view.writes, view.steps):
    # One line a write, orphans first, each with its key: read it back before retrying.
    box.markdown(("⚠️ " if note.orphan else "") + fmt.escape_md(note.sentence()))
# Compare is offered only when there is a completed run of the agent to compare with (the
# comparison page would say "Nothing to compare with"); the same search that page makes.
typical, _ = run_compare.typical_around(int(run["start_ns"]), run["agent"], str(run["run_id"]),
                                        lambda filters: data.report("runs", filters))
next_step = run_story.next_step(run, view.steps, view.writes, typical.run_id is not None)
box.markdown(f"**Next step:** {fmt.escape_md(next_step.text)}")
if next_step.what_if:
    box.page_link(SIMULATE_PAGE, icon=":material/tune:",
                  label=f"What if, with {next_step.step_key} capped at "
                        f"{fmt.duration(next_step.cap_ms)}",
                  query_params=next_step.what_if_params())
if next_step.commands:
    # The same step in a terminal, as `budgetscope run` prints it (a code block: its copy
    # button, and nothing in it is interpreted).
    box.code("\n".join(shlex.join(["budgetscope", "--db", ctx.status.path, *arguments])
                       for arguments in next_step.commands), language=None, wrap_lines=True)
if next_step.kind == run_story.DECLARE_BUDGET:
    box.page_link(BUDGETS_PAGE, label="Declared budgets", icon=":material/timer:")
if typical.run_id is not None:
    box.page_link(links.COMPARE_PAGE, label="Compare with a typical run of this agent",
                  icon=":material/compare_arrows:",
                  query_params=links.run_params(str(run["run_id"]), ctx.state),
                  help="Side by side with the median-utilisation completed run of the same "
                       "agent around this run's start (or one you pick there): step by step, "
                       "where the time went differently.")

outcome = run["outcome"]
# A stated outcome outside the known list is span data: show it escaped below, not in a tile.
known = outcome in run_story.STATED_OUTCOMES
source = run.get("budget_source")
# Tiles that wrap (dashboard/metrics.py): in fixed columns, "exhausted" read "exhau…" at 900 px.
headline([
    Metric("Outcome", outcome if known else (fmt.NO_VALUE if fmt.missing(outcome) else "other"),
           help="budget.run.outcome as the agent stated it"),
    Metric("Exhausted", fmt.NO_VALUE if fmt.missing(exhausted) else ("yes" if exhausted
                                                                     else "no"),
           help=story.exhausted_reason or None),
    Metric("Utilisation", fmt.percent(run["utilisation"])),
    Metric("Budget", fmt.duration(run["budget_ms"]),
           help={"span": "from the run's own budget.total_ms",
                 "declared": "declared for this run's agent, or the default for agents "
                             "without one (Budgets page; docs/metrics.md §10)"}.get(
               source, "unknown: no budget.total_ms and no budget declared")),
    Metric("Elapsed", fmt.duration(run["elapsed_ms"])),
    Metric("Overrun", fmt.duration(run["overrun_ms"])),
], key="run_headline")

if fmt.missing(run["budget_ms"]):
    st.warning(story.ending + " (docs/metrics.md §1) Declare one on the Budgets page or with "
               "`budgetscope budgets set AGENT DURATION`.")
else:
    st.caption("Budget source: " + ("**declared** (its agent's declared budget, or the "
                                    "default; not the run's own)" if source == "declared"
                                    else "**span** (the run's own budget.total_ms)")
               + f" · **Unattributed:** {fmt.duration(run['unattributed_ms'])} (time with no "
                 "step running)")

# ---- tokens and dollars: the cost block `budgetscope run` prints, in its words ---------------
spends = run_cost.worth_telling(run, view.steps)
if spends:
    complete = fmt.missing(run.get("cost_complete")) or bool(run.get("cost_complete"))
    usd_source = run.get("usd_budget_source")
    headline([
        Metric("Spent", fmt.usd_nano(run.get("cost_nano"), at_least=not complete),
               help="Σ known cost of its metered calls (docs/metrics.md §11.4); ≥: a lower "
                    "bound" if not complete else "Σ known cost of its metered calls "
                    "(docs/metrics.md §11.4)"),
        Metric("Dollar budget", fmt.usd_nano(run.get("usd_budget_nano")),
               help={"span": "from the run's own budget.total_usd",
                     "declared": "declared for this run's agent, or the default (Budgets "
                                 "page)"}.get(usd_source, "unknown: no budget.total_usd and "
                                              "none declared")),
        Metric("Cost utilisation", ("≥ " if not complete and not fmt.missing(
            run.get("cost_utilisation")) else "") + fmt.percent(run.get("cost_utilisation")),
               help="cost / dollar budget (docs/metrics.md §11.7)"),
        Metric("Tokens", fmt.count(run.get("tokens")),
               help="input (cache included) + output (reasoning included); the token "
                    "budget: " + (fmt.count(run.get("token_budget"))
                                  if not fmt.missing(run.get("token_budget")) else "unknown")),
    ], key="run_cost_headline")
    cost_box = st.container(border=True, key="run_cost_block")
    cost_box.markdown("  \n".join(f"**{label}:** {fmt.escape_md(text)}"
                                   for label, text in run_cost.cost_answers(run)))
    cost_box.page_link(COST_PAGE, label="Tokens and dollars of every run: the Cost page",
                       icon=":material/payments:", query_params=ctx.state.query_params())

def spend_section() -> None:
    """The run's cumulative spend against its dollar budget and its cost by step
    (docs/metrics.md §11.6, §11.9), below its steps: where the money went, call by call."""
    st.subheader("Spend")
    spend = data.run_spend(run)
    if spend.calls.empty:
        st.caption("No call of this run sent usage or a cost: there is nothing to add up.")
    else:
        st.plotly_chart(cost_figures.cumulative_spend(
            spend, int(run["start_ns"]), view.steps, run.get("cost_culprit_span_id")),
            key="cumulative_spend")
        st.caption(fmt.escape_md(
            "Each point is a metered call, counted when it ends (its bill is known then): the "
            "line is the run's known cost so far, the wine line its dollar budget, the star the "
            "call that reached it (the crosser's)."
            + (f" {fmt.plural(spend.unpriced_calls, 'call')} had no price (marked ×): the "
               "line leaves them out, so it is a lower bound."
               if spend.unpriced_calls else "")))
    by_step = cost_summaries.run_step_costs(view.steps)
    if not by_step.empty:
        st.markdown("**Cost by step**")
        tables.table(by_step, hide_index=True, key="run_step_costs",
                     height=min(38 + 35 * len(by_step), 740),
                     column_config={
                         "#": st.column_config.TextColumn("#", width=50),
                         "in": st.column_config.TextColumn(
                             "in", help="input tokens, the cache read and written included"),
                         "out": st.column_config.TextColumn(
                             "out", help="output tokens, reasoning included"),
                         "cost": st.column_config.TextColumn(
                             "cost", help="≥: a lower bound (an unpriced call under it); "
                             "unknown: no price; no usage: a model step that sent none and "
                             "may have been billed"),
                         "from": st.column_config.TextColumn(
                             "from", help="where the cost came from: reported by the "
                             "instrumentation, the bundled price table, your price (prices "
                             "set), no price, or mixed sources")})


# The link is a code block (its copy button) inside a popover: Streamlit draws a popover's
# content only once it is opened, and a code block on the page made every first visit fetch
# and compile the 1.5 MB syntax-highlighting bundle beside the charts' Plotly.
with st.popover("Link to this view", icon=":material/link:",
                help="The address of this run with the current filters, to paste into a chat"):
    st.code(links.run_url(str(run["run_id"]), ctx.state), language=None, wrap_lines=True)

if view.steps.empty:
    st.info("This run has no steps.")
    if spends:
        spend_section()
else:
    choices = list(range(len(view.steps)))
    pick_key = f"step_details_pick:{run['run_id']}"  # each run opens on its own first step

    def open_clicked_step() -> None:
        """A click on a step's bar (or its failure mark, or its outline) opens its details
        below: the bars carry their row in `customdata` (run_figures.waterfall)."""
        for point in st.session_state["waterfall"].selection.points:
            row = point.get("customdata")
            if isinstance(row, int | float) and int(row) in choices:
                st.session_state[pick_key] = int(row)
                return

    st.plotly_chart(run_figures.waterfall(run, view.steps), key="waterfall",
                    on_select=open_clicked_step, selection_mode="points")
    st.caption("Click a step's bar to open its details below.")
    st.subheader("Steps")
    table = run_summaries.run_steps_table(view.steps, run)
    # What on-call reads first fits the page at 1400 px without a horizontal scroll; what
    # recognised each step, the write fields and the span ids are one click away, below.
    height = min(38 + 35 * len(view.steps), 740)
    tables.table(table, hide_index=True, key="steps_table", height=height,
                 column_order=["#", "step", "class", "role", "start", "duration", "share",
                               "allocated", "utilisation"],
                 column_config={
                     # Fixed widths: the grid sizes a column by its first rows, so a class or
                     # role further down ("upstream_error", "culprit + holder") was cut.
                     "#": st.column_config.TextColumn(
                         "#", width=50, help="the step's number: its rank by start among the "
                         "run's top-level steps; 3.1 is the 1st step inside #3"),
                     "class": st.column_config.TextColumn("class", width=120),
                     "role": st.column_config.TextColumn("role", width=150),
                     "share": st.column_config.ProgressColumn(
                         "share", help="consumption / budget (docs/metrics.md §4)",
                         format="%.1f%%", min_value=0.0, max_value=100.0),
                     "utilisation": st.column_config.TextColumn(
                         "utilisation", help="duration / allocated (docs/metrics.md §5)")})

    if spends:
        spend_section()

    st.subheader("Step details")
    # One click away: the attributes, events, exception and status message of a step, as
    # text (a table and plain text never interpret what a span says). Opens on the first
    # failed step, else the culprit: what on-call reads first.
    failed = [i for i, c in enumerate(view.steps["step_class"]) if c != "ok"]
    culprit_row = [i for i, span in enumerate(view.steps["span_id"])
                   if span == run.get("culprit_span_id")]
    first = (failed or culprit_row or [0])[0]
    if st.session_state.get(pick_key) not in choices:
        st.session_state[pick_key] = first  # the widget's value, set once (no default beside)
    picked = st.selectbox(
        "Step", choices, key=pick_key,
        format_func=lambda i: (f"#{view.steps['number'].iloc[i]} "
                               f"{view.steps['step_key'].iloc[i]} · "
                               f"{view.steps['step_class'].iloc[i]}"))
    step = view.steps.iloc[picked if picked is not None else first]
    details = data.step_details(str(run["run_id"]), str(run["trace_id"]), str(step["span_id"]))
    if details is None:
        st.caption("This step's span is not stored here.")
    else:
        facts = pd.DataFrame({"": ["span", "span id", "status", "status message",
                                   "exception type", "exception message"],
                              "value": [details.span_name, details.span_id, details.status,
                                        details.status_message or fmt.NO_VALUE,
                                        details.exception_type or fmt.NO_VALUE,
                                        details.exception_message or fmt.NO_VALUE]})
        tables.table(facts, key="step_details_facts", hide_index=True,
                     column_config={"": st.column_config.TextColumn("", width=140),
                                    "value": st.column_config.TextColumn("value", width=720)})
        left, right = st.columns(2)
        with left:
            st.caption(f"Attributes ({len(details.attributes):,})"
                       + (f"; {details.dropped}" if details.dropped else ""))
            tables.table(pd.DataFrame(details.attributes, columns=["attribute", "value"]),
                         key="step_details_attributes", hide_index=True,
                         height=tables.table_height(len(details.attributes), most=12))
        with right:
            start_ns = int(run["start_ns"])
            events = pd.DataFrame(
                [(f"+{fmt.duration((t - start_ns) / 1e6)}" if t else fmt.NO_VALUE, name, text)
                 for t, name, text in details.events], columns=["at", "event", "attributes"])
            st.caption(f"Events ({len(details.events):,})")
            # half the page: fixed widths keep the three columns inside it
            tables.table(events, key="step_details_events", hide_index=True,
                         height=tables.table_height(len(events), most=12),
                         column_config={"at": st.column_config.TextColumn("at", width=70),
                                        "event": st.column_config.TextColumn("event", width=90),
                                        "attributes": st.column_config.TextColumn(
                                            "attributes", width=280)})
    # Behind a toggle: the recognition runs again on this one trace, in memory (store.explain),
    # which a first visit need not pay for.
    if st.toggle("Why is each span (not) a step?", key="explain_spans",
                 help="Every span of the trace in tree order: the rule that made it a step, or "
                      "why it is a wrapper, one call's second span, or part of a step "
                      "(docs/conventions.md, when a step is missing or counted twice)."):
        explained = data.span_explanation(str(run["trace_id"]))
        if explained is None:
            st.caption("Not on the ClickHouse backend: the explanation re-runs the recognition "
                       "on a DuckDB file.")
        else:
            tables.table(pd.DataFrame({
                "span": ["  " * int(i) + str(name) for i, name in
                         zip(explained["indent"], explained["name"], strict=True)],
                "role": explained["role"], "why": explained["why"],
                "step": explained["step_key"].map(fmt.text),
                "rule": [fmt.NO_VALUE if fmt.missing(row) else f"row {row} {fmt.text(conv)}"
                         for row, conv in zip(explained["step_row"], explained["convention"],
                                              strict=True)],
                "span id": explained["span_id"]}), key="explain_table", hide_index=True,
                height=tables.table_height(len(explained), most=40),
                column_config={"why": st.column_config.TextColumn("why", width=520)})
    with st.expander("What recognised each step, write fields, span ids"):
        tables.table(table, hide_index=True, key="steps_details_table", height=height,
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
    numbers = dict(zip(view.steps["span_id"], view.steps["number"], strict=True))
    tables.table(pd.DataFrame({
        "#": writes["span_id"].map(lambda span: fmt.text(numbers.get(span))),
        "step": writes["step_key"], "class": writes["step_class"],
        "effect status": writes["effect_status"].map(fmt.text),
        "idempotency key": writes["idempotency_key"].map(fmt.text),
        "attempt": writes["attempt"].map(lambda v: fmt.text(v if fmt.missing(v) else int(v))),
        "uncertain": writes["is_uncertain"],
        "reconciliations": writes["reconciliations"],
        "last result": writes["last_result"].map(fmt.text),
        "orphan": writes["orphan"], "at": writes["offset_ms"].map(lambda v: f"+{fmt.duration(v)}"),
    }), hide_index=True, key="writes_table", height=tables.table_height(len(writes)),
        # narrow where the values are short, so that the eleven columns fit 1400 px
        column_config={"#": st.column_config.TextColumn("#", width=40),
                       "attempt": st.column_config.Column("attempt", width=60),
                       "uncertain": st.column_config.Column("uncertain", width=70),
                       "orphan": st.column_config.Column("orphan", width=60),
                       "reconciliations": st.column_config.Column(
                           "read back", width=80, help="reconciliations of this write")})

st.subheader("Log records")
if view.log_records.empty:
    st.caption("No OTLP log records for this run's trace.")
else:
    more = len(view.log_records) > LOG_RECORDS_SHOWN
    st.caption(fmt.escape_md(
        f"The first {LOG_RECORDS_SHOWN} log records of this run's trace, by time"
        if more else f"{fmt.plural(len(view.log_records), 'log record')} of this run's "
                     "trace, by time")
        + " (a record with exception.type counts as its span's exception, docs/metrics.md §3).")
    tables.table(run_summaries.run_log_table(view.log_records, run), hide_index=True,
                 key="log_records_table")
