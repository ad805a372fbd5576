"""Cost: tokens and dollars against their budgets (docs/metrics.md §11). Is the dollar (or token)
budget binding, who spent the budgets that ran out (the culprit) and which call crossed the line
(the crosser), each agent's weekly spend against its weekly budget, and how much of the spend is
measured and priced. The page's choice of budget is in its address (`dimension=tokens`), as
the filters are; the downloads are the CLI's reports, byte for byte."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import (
    cost_figures,
    cost_summaries,
    data,
    drill,
    figures,
    fmt,
    links,
    notices,
    page_context,
    sidebar,
    tables,
)
from dashboard.cost_summaries import BY_NAME, USD
from dashboard.exports import cli_command, csv_file_name
from dashboard.metrics import Metric, headline
from queries.render import to_csv_bytes

ctx = page_context.current()
DIMENSION_KEY = "cost_dimension"
WORDS = {"usd": "dollars", "tokens": "tokens"}

st.title("Cost")
st.caption(fmt.escape_md(ctx.state.label(ctx.now)) + " · tokens and dollars of the runs that "
           "started in the range (docs/metrics.md §11). A cost shown with ≥ is a lower bound: "
           "a call had no price, or a model step sent no usage and may have been billed.")
if notices.no_runs_in_range(ctx):
    st.stop()

# ---- the page's choice, in its address ------------------------------------------------------
asked = st.query_params.get("dimension", USD)
if asked not in BY_NAME:
    st.warning(fmt.escape_md(f"unknown dimension {asked!r}; showing dollars (usd or tokens)"))
    asked = USD
if ctx.arrived or st.session_state.get("_cost_dimension_url") != asked:
    st.session_state[DIMENSION_KEY] = asked  # a link or the back button: the address wins
chosen = st.segmented_control(
    "Budget", list(BY_NAME), key=DIMENSION_KEY, format_func=lambda d: WORDS[d],
    help="The budget the distribution and the attribution below are of: the dollar budget "
         "(budget.total_usd, or a declared --usd) or the token budget.") or USD
dimension = BY_NAME[chosen]
st.session_state["_cost_dimension_url"] = chosen
sidebar.write_url(ctx.state, {"dimension": chosen} if chosen != USD else {},
                  owned=frozenset(sidebar.COST_KEYS))
word = "dollar" if chosen == USD else "token"

# ---- headline --------------------------------------------------------------------------------
totals = data.report("headline", ctx.filters).iloc[0]
cost = data.report("cost", ctx.filters)
summary = data.report("cost_attribution_summary" if chosen == USD
                      else "token_attribution_summary", ctx.filters).iloc[0]
coverage = data.report("pricing_coverage", ctx.filters).iloc[0]
incomplete = int(totals["incomplete_cost_runs"])
spent = cost_summaries.dollars(totals["cost_nano"])
matrix = cost_summaries.crosser_culprit(cost, dimension)
same_call, other_call, other_step = fmt.percents_adding_up(
    [matrix.same_call, matrix.same_key - matrix.same_call, matrix.runs - matrix.same_key]) \
    if matrix.runs else [fmt.NO_VALUE] * 3
budgeted, exhausted = (("usd_budgeted_runs", "usd_exhausted_runs") if chosen == USD
                       else ("token_budgeted_runs", "token_exhausted_runs"))
headline([
    Metric("Spend", fmt.usd_headline(spent, at_least=incomplete > 0),
           help="Σ known cost of the runs (docs/metrics.md §11.4)"
                + (f"; {fmt.plural(incomplete, 'run')} with a cost that is a lower bound"
                   if incomplete else "; every run's cost is complete")
                + ". " + fmt.escape_md(f"In full: {fmt.usd(spent, at_least=incomplete > 0)}.")),
    Metric("Tokens", fmt.count(int(totals["tokens"])),
           help="input (cache included) + output (reasoning included) of the metered calls "
                "(docs/metrics.md §11.1)"),
    Metric(f"{word.capitalize()}-exhausted runs", fmt.count(totals[exhausted]),
           help=f"of {fmt.plural(int(totals[budgeted]), 'run')} with a {word} budget (known, "
                "or enforced by a gateway or the agent): docs/metrics.md §11.5"),
    Metric(f"{word.capitalize()} exhaustion rate",
           fmt.percent(totals["usd_exhaustion_rate" if chosen == USD
                              else "token_exhaustion_rate"]),
           help=f"{word}-exhausted runs ÷ runs budgeted in {word}s"),
], key="cost_headline")
headline([
    Metric("Culprit is the crosser", same_call,
           help=f"{word.capitalize()}-exhausted runs whose crosser (the call that reached the "
                "budget) is in the step that spent the most: cost_culprit_is_crosser_rate "
                f"over the {fmt.plural(matrix.runs, 'run')} with a crosser (docs/metrics.md "
                "§11.6)"),
    Metric("Another call, same step", other_call,
           help="The crosser has the culprit's step key but is another call of it (#1 and "
                "#12 of model:gpt-4o)."),
    Metric("Another step", other_step,
           help="Another step key crossed the line: cutting it would not have kept the run "
                "within budget."),
    Metric("Unpriced steps", fmt.count(totals["unpriced_steps"]),
           help="top-level steps with a call whose model has no price: its cost is unknown, "
                "never $0 (Pricing coverage, below)"),
], key="cost_headline_attribution")

# ---- is the budget binding? -----------------------------------------------------------------
st.subheader(f"Is the {word} budget binding?")
percentiles = cost_summaries.utilisation_percentiles(cost, dimension)
histogram = cost_summaries.utilisation_histogram(cost, dimension)
if histogram.empty:
    st.info(f"No run in this range has a known {word} budget: budget.total_"
            f"{'usd' if chosen == USD else 'tokens'} on its run span, or one declared on the "
            "Budgets page.")
else:
    of = "cost utilisation" if chosen == USD else "token utilisation"
    st.plotly_chart(figures.utilisation_distribution(
        histogram, percentiles, False, of=of,
        axis=f"{of} ({'cost' if chosen == USD else 'tokens'} / {word} budget; the wine line "
             "is the budget)"), key="cost_utilisation_histogram")
    st.caption(f"One panel per agent, over its runs with a known {word} budget (runs whose "
               "cost is a lower bound included: their utilisation is at least that). Vertical "
               "lines: its p50 (dotted), p90 (dashed) and p99 (solid); the wine line is 100 %.")
    tables.table(fmt.readable_table(percentiles), hide_index=True,
                 key="cost_utilisation_table", height=tables.table_height(len(percentiles)),
                 column_config={
                     "runs": st.column_config.Column(
                         f"{word}-budgeted runs", help=f"runs with a known {word} budget: "
                         "what the percentiles are over"),
                     "incomplete": st.column_config.Column(
                         "of which ≥", help="runs whose cost is a lower bound (their "
                         "utilisation is at least the one counted)")})

# ---- who spent it, and who crossed the line -------------------------------------------------
st.subheader(f"Who spent the {word} budget of the runs that ran out of it")
attribution = data.report("cost_attribution" if chosen == USD else "token_attribution",
                          ctx.filters)
if attribution.empty:
    st.info(f"No {word}-exhausted runs in this range.")
else:
    drill.chart(cost_figures.budget_shares(attribution, chosen), "cost_shares",
                drill.budget_exhausted_runs(chosen))
    st.caption(f"A step key's share is Σ what its steps spent over Σ the runs' {word} "
               "budgets, not clipped: parallel calls each pay in full, so the shares of runs "
               "that overspent add up past 100 %. Click a bar to list those runs.")
    if len(matrix.keys) == 1:
        st.caption(fmt.escape_md(
            f"Every crosser had the culprit's step key, {matrix.keys[0]}: in "
            f"{matrix.same_call:,} of {fmt.plural(matrix.runs, 'run')} the very call that "
            "spent the most, in the others another call of it."))
    elif matrix.keys:
        st.plotly_chart(figures.holder_culprit_matrix(
            matrix.keys, matrix.cells, figures.MatrixWords(
                title=f"Crosser × culprit ({word}-exhausted runs)", row="crosser",
                row_axis="crosser (its call reached the budget)",
                other_step="another step's call crossed the line", drill=False)),
            key="crosser_culprit")
        st.caption(fmt.escape_md(
            f"On the dotted diagonal the crosser has the culprit's step key: {matrix.same_key:,}"
            f" of {fmt.plural(matrix.runs, 'run')}, of which {matrix.same_call:,} the same "
            "call. A gateway that stops a run at its cap points at the crosser; cutting the "
            "culprit is what keeps the next run within budget."))
    report_name = "cost-attribution"
    options = () if chosen == USD else ("--dimension", "tokens")
    left, right = st.columns([1, 3])
    left.download_button("Download CSV", to_csv_bytes(attribution), key="cost_attribution_csv",
                         file_name=csv_file_name(
                             report_name if chosen == USD else "cost-attribution-tokens",
                             ctx.filters),
                         mime="text/csv", icon=":material/download:", on_click="ignore")
    with right.popover("The same bytes from the command line", icon=":material/terminal:"):
        st.code(cli_command(report_name, ctx.filters, ctx.status.path, *options),
                language="bash", wrap_lines=True)
    tables.table(fmt.readable_table(attribution), hide_index=True,
                 key="cost_attribution_table", height=tables.table_height(len(attribution)),
                 column_config={
                     "step_key": st.column_config.TextColumn("step key"),
                     "budget_share": st.column_config.Column(
                         "budget share", help=f"Σ this key's spend ÷ Σ {word} budget over the "
                         f"{word}-exhausted runs (not clipped)"),
                     "culprit_runs": st.column_config.Column(
                         "culprit of (runs)", help="runs in which this key spent the most"),
                     "crosser_runs": st.column_config.Column(
                         "crosser of (runs)", help="runs in which a call of this key reached "
                         "the budget"),
                     "exhausted_runs": st.column_config.Column(
                         "in exhausted runs", help="exhausted runs with a step of this key")})

# ---- weekly spend ---------------------------------------------------------------------------
st.subheader("Weekly spend against the weekly budget")
weekly = cost_summaries.weekly_spend(data.report("weekly", ctx.filters))
if weekly.empty:
    st.info("No runs in this range.")
else:
    st.plotly_chart(cost_figures.weekly_spend(weekly), key="weekly_spend")
    declared = weekly["weekly_budget_usd"].notna().any()
    st.caption("Each agent's known spend per ISO week (UTC, weeks start Monday; a week the "
               "range cuts short is drawn lighter)"
               + ("; the wine line is its weekly budget (`budgets set AGENT --usd-per-week X`, "
                  "docs/metrics.md §11.8)." if declared else
                  ". No agent has a weekly budget: declare one on the Budgets page or with "
                  "`budgetscope budgets set AGENT --usd-per-week 20`.")
               + " The Weekly report holds the same figures as a table.")

# ---- pricing coverage -----------------------------------------------------------------------
st.subheader("Pricing coverage")
models = data.report("models", ctx.filters)
sources = cost_summaries.spend_by_source(models)
calls = int(sources["spans"].sum())
unpriced_calls = int(sources.loc[sources["price_source"] == "unpriced", "spans"].sum())
headline([
    Metric("Model steps metered", fmt.percent(coverage["metered_share"]),
           help=f"{fmt.count(coverage['metered_model_steps'])} of "
                f"{fmt.plural(int(coverage['model_steps']), 'model step')} sent usage (or are "
                f"above a call that did); {fmt.count(coverage['possibly_billed_steps'])} of "
                "the others may have been billed (docs/metrics.md §11.4)"),
    Metric("Calls priced", fmt.percent((calls - unpriced_calls) / calls) if calls
           else fmt.NO_VALUE,
           help=f"metered calls with a known cost: {fmt.count(calls - unpriced_calls)} of "
                f"{fmt.count(calls)} (reported by the instrumentation, your price, or the "
                "bundled table)"),
    Metric("Unpriced calls", fmt.count(unpriced_calls),
           help="metered calls whose model has no price: their cost is unknown, never $0"),
], key="cost_coverage_headline")
check = data.price_check()
if check.empty:
    st.success("Every metered call has a price: reported by the instrumentation, set with "
               "`budgetscope prices set`, or from the bundled table.")
else:
    st.markdown(f"**{fmt.plural(len(check), 'model')} seen without a price** (in every stored "
                "trace, as `budgetscope prices check` lists them). Price each with its "
                "command, X in USD per million tokens:")
    tables.table(check.drop(columns=["command"]).assign(
        model=check["model"].map(lambda m: "(no model named)" if fmt.missing(m) else m),
        provider=check["provider"].map(fmt.text)), hide_index=True, key="unpriced_models",
        height=tables.table_height(len(check), most=10))
    commands = [c for c in check["command"] if c]
    if commands:  # a code block: the text as it is, with its copy button
        st.code("\n".join(commands), language=None, wrap_lines=True)
        if data.backend_url() is not None:
            st.caption("On the ClickHouse backend: with `BUDGETSCOPE_BACKEND` set to its URL, or "
                       "`budgetscope --backend URL prices set …`.")
st.markdown("**Where the spend came from**")
tables.table(sources.assign(
    price_source=sources["price_source"].map({
        "reported": "reported by the instrumentation", "override": "your price",
        "bundled": "bundled price table", "unpriced": "no price"}),
    spans=sources["spans"].map(fmt.count), tokens=sources["tokens"].map(fmt.count),
    cost_usd=[fmt.NO_VALUE if not calls_of else "unknown" if cost_of is None
              else fmt.usd(cost_of)
              for calls_of, cost_of in zip(sources["spans"], sources["cost_usd"],
                                           strict=True)]),
    hide_index=True, key="spend_by_source",
    column_config={"price_source": st.column_config.TextColumn("price source"),
                   "spans": st.column_config.Column("metered calls"),
                   "cost_usd": st.column_config.TextColumn("cost")})
framework = int(coverage["runs_with_reported_total"])
if framework:
    st.caption(fmt.escape_md(
        f"{fmt.plural(framework, 'run')} carry a framework's own total: it reported "
        f"{fmt.usd(coverage['reported_total_usd'])}, the sum of their calls is "
        f"{fmt.usd(coverage['computed_total_usd'])} (the total is shown beside the sum, "
        "never added to it: docs/metrics.md §11.2)."))
else:
    st.caption("No run carries a framework's own total cost (an aggregate above its calls): "
               "every figure here is the sum of the calls.")
with st.expander("Per model: calls, tokens and cost (report models)"):
    st.download_button("Download CSV", to_csv_bytes(models), key="models_csv",
                       file_name=csv_file_name("models", ctx.filters), mime="text/csv",
                       icon=":material/download:", on_click="ignore")
    st.code(cli_command("models", ctx.filters, ctx.status.path), language="bash",
            wrap_lines=True)
    tables.table(fmt.readable_table(models.assign(
        model=models["model"].map(fmt.text), provider=models["provider"].map(fmt.text))),
        hide_index=True, key="models_table", height=tables.table_height(len(models)))

# ---- the runs ---------------------------------------------------------------------------------
st.subheader("The runs that spent the most")
costly = cost.assign(_cost=cost["cost_usd"].map(lambda v: float(v) if v is not None else -1.0))
costly = costly.sort_values(["_cost", "run_id"], ascending=[False, True]).head(10)
if not costly.empty:
    def open_costly() -> None:
        rows = st.session_state["costly_runs"].selection.rows
        if rows:
            st.session_state["_open_costly"] = str(costly.iloc[rows[0]]["run_id"])

    tables.table(pd.DataFrame({
        "run": data.run_id_starts([str(r) for r in costly["run_id"]]),
        "agent": costly["agent"].map(fmt.text),
        "cost": [fmt.usd(c, at_least=not bool(k)) for c, k in
                 zip(costly["cost_usd"], costly["cost_complete"], strict=True)],
        "budget": costly["usd_budget"].map(fmt.usd),
        "utilisation": [("≥ " if not bool(k) and not fmt.missing(u) else "") + fmt.percent(u)
                        for u, k in zip(costly["cost_utilisation"], costly["cost_complete"],
                                        strict=True)],
        "cost culprit": costly["cost_culprit"].map(fmt.text),
        "crosser": costly["cost_crosser"].map(fmt.text)}), hide_index=True,
        key="costly_runs", on_select=open_costly, selection_mode="single-row",
        height=tables.table_height(len(costly)))
    run_to_open = st.session_state.pop("_open_costly", None)
    if run_to_open:
        st.switch_page(links.RUN_PAGE, query_params=links.run_params(run_to_open, ctx.state))
    st.caption("Select a row to open its run view (its cost block and cumulative spend). "
               "Every run, with its filters by dollars and tokens, is on the Runs page.")
left, right = st.columns([1, 3])
left.download_button("Download cost per run (CSV)", to_csv_bytes(cost), key="cost_csv",
                     file_name=csv_file_name("cost", ctx.filters), mime="text/csv",
                     icon=":material/download:", on_click="ignore")
with right.popover("The same bytes from the command line", icon=":material/terminal:"):
    st.code(cli_command("cost", ctx.filters, ctx.status.path), language="bash",
            wrap_lines=True)
