"""Overview: the period's headline numbers against the previous period, daily trends, the top
culprits, and the runs worth reviewing (each opens the run view)."""

from __future__ import annotations

import streamlit as st

from dashboard import data, drill, figures, fmt, links, notices, page_context, summaries, tables
from dashboard.metrics import Metric, headline
from queries.filters import Filters

ctx = page_context.current()
st.title("Overview")
st.caption(fmt.escape_md(ctx.state.label(ctx.now)))
if notices.no_runs_in_range(ctx):
    st.stop()


def totals(filters: Filters) -> summaries.PeriodTotals:
    return summaries.period_totals(data.report("headline", filters))


now = totals(ctx.filters)
before = totals(ctx.previous) if ctx.previous is not None else None
# A previous period without runs is nothing to compare with: "+1,800 runs" against an empty
# week before the data began says nothing about the period.
empty_before = before is not None and before.runs == 0
if empty_before:
    before = None


def delta(field: str, kind: str) -> str | None:
    """The change against the previous period as shown: `+1.2 pp` for a rate, `+0.4 per 100
    steps` for a count whose traffic differs between periods, `+12` for the runs themselves;
    `±0` when the change rounds to nothing at the precision shown."""
    if before is None:
        return None
    a, b = getattr(now, field), getattr(before, field)
    if fmt.missing(a) or fmt.missing(b):
        return None
    if kind == "rate":
        shown = f"{(a - b) * 100:+.1f}"
        unit = " pp"
    elif kind == "usd":  # rounded as the tile's total is (fmt.usd_headline)
        # usd_headline keeps three significant digits under $1: only no change reads as none
        return "±0" if a == b else ("+" if a > b else "-") + fmt.usd_headline(abs(a - b))
    elif kind in ("per 100 steps", "per 100 writes"):
        shown, unit = f"{a - b:+.1f}", f" {kind}"
    else:
        shown, unit = f"{a - b:+,}", ""
    return "±0" if float(shown.replace(",", "")) == 0 else shown + unit


# (label, value, delta, colour): "inverse" where a rise is bad (red), "normal" where a rise is
# good, "off" where neither (the traffic itself, the typical run's utilisation).
metrics = [
    ("Runs", fmt.count(now.runs), delta("runs", "count"), "off"),
    ("Exhaustion rate", fmt.percent(now.exhaustion_rate), delta("exhaustion_rate", "rate"),
     "inverse"),
    ("Utilisation p50", fmt.percent(now.utilisation_p50), delta("utilisation_p50", "rate"), "off"),
    ("Utilisation p99", fmt.percent(now.utilisation_p99), delta("utilisation_p99", "rate"),
     "inverse"),
    ("Client give-ups", fmt.count(now.client_timeouts),
     delta("client_timeouts_per_100_steps", "per 100 steps"), "inverse"),
    ("Upstream failures", fmt.count(now.upstream_errors),
     delta("upstream_errors_per_100_steps", "per 100 steps"), "inverse"),
    ("Reconciliation rate", fmt.percent(now.reconciliation_rate),
     delta("reconciliation_rate", "rate"), "inverse"),
    ("Orphan writes", fmt.count(now.orphan_writes),
     delta("orphan_writes_per_100_writes", "per 100 writes"), "inverse"),
    # tokens and dollars (docs/metrics.md §11): what the period spent, and how often a run ran
    # out of its dollar budget
    ("Spend", fmt.usd_headline(now.cost_usd, at_least=now.incomplete_cost_runs > 0),
     delta("cost_usd", "usd"), "off"),
    ("Dollar exhaustion rate", fmt.percent(now.usd_exhaustion_rate),
     delta("usd_exhaustion_rate", "rate"), "inverse"),
    ("Tokens", fmt.count(now.tokens), delta("tokens", "count"), "off"),
    ("Unpriced steps", fmt.count(now.unpriced_steps), delta("unpriced_steps", "count"),
     "inverse"),
]


def exact_spend() -> str:
    """The tile's total and change to every digit (the tile rounds them: fmt.usd_headline)."""
    exact = f"In full: {fmt.usd(now.cost_usd, at_least=now.incomplete_cost_runs > 0)}"
    if before is None or fmt.missing(now.cost_usd) or fmt.missing(before.cost_usd):
        return exact
    change = now.cost_usd - before.cost_usd
    return (f"{exact}, {fmt.usd(abs(change))} {'more' if change >= 0 else 'less'} than the "
            "previous period")


def _per_100(value: float, of: str) -> str:
    return fmt.NO_VALUE if fmt.missing(value) else f"{value:.1f} per 100 {of}"


helps = {
    "Runs": "Runs started in the period; the change is in runs (the traffic itself: no colour).",
    "Client give-ups": "Steps whose own deadline fired (client_timeout): our configuration. "
                       f"{_per_100(now.client_timeouts_per_100_steps, 'steps')} of "
                       f"{fmt.count(now.steps)}; the change is per 100 steps, because the "
                       "periods' traffic differs.",
    "Upstream failures": "Steps the upstream failed (upstream_error: 5xx, 429, UNAVAILABLE…): "
                         "their availability. "
                         f"{_per_100(now.upstream_errors_per_100_steps, 'steps')} of "
                         f"{fmt.count(now.steps)}; the change is per 100 steps.",
    "Exhaustion rate": "Exhausted runs / runs with a known budget (docs/metrics.md §4). A rise "
                       "is bad.",
    "Utilisation p99": "The 99th percentile of elapsed / budget: a rise is nearer exhaustion.",
    "Reconciliation rate": "Reconciled writes / write steps (docs/metrics.md §6): the share of "
                           "writes that needed reading back because their effect was uncertain, "
                           "so a rise is bad.",
    "Orphan writes": "Uncertain writes nobody read back (docs/metrics.md §6). "
                     f"{_per_100(now.orphan_writes_per_100_writes, 'write steps')} of "
                     f"{fmt.count(now.write_steps)}; the change is per 100 write steps.",
    "Spend": "Σ known cost of the period's runs (docs/metrics.md §11.4)"
             + (f"; ≥: {fmt.plural(now.incomplete_cost_runs, 'run')} with a call that has no "
                "price, or a model step that sent no usage, so the sum is a lower bound"
                if now.incomplete_cost_runs else "")
             + ". " + fmt.escape_md(exact_spend())
             + ". The change is in dollars (the traffic's, like the runs': no colour). The "
               "Cost page has the rest.",
    "Dollar exhaustion rate": "Runs that spent, or were stopped at, their dollar budget / "
                              f"runs with one: {fmt.count(now.usd_exhausted_runs)} of "
                              f"{fmt.count(now.usd_budgeted_runs)} (docs/metrics.md §11.5). "
                              "A rise is bad.",
    "Tokens": "Input (cache included) + output (reasoning included) of the metered calls "
              "(docs/metrics.md §11.1).",
    "Unpriced steps": "Top-level steps with a call whose model has no price: its cost is "
                      "unknown, never $0. `budgetscope prices check` lists the models.",
}
# Three rows of four, as the figures pair up (the runs and their budget; the failures and the
# writes; the tokens and dollars), each wrapping on its own in a narrow window.
figures_shown = [Metric(label, value, change, color, helps.get(label))
                 for label, value, change, color in metrics]
headline(figures_shown[:4], key="overview_headline")
headline(figures_shown[4:8], key="overview_headline_failures")
headline(figures_shown[8:], key="overview_headline_spend")
if empty_before:
    st.caption("The previous period of the same length holds no runs: nothing to compare "
               "with.")
elif before is None:
    st.caption("Pick a bounded time range to compare with the previous period.")
else:
    st.caption("Changes are against the previous period of the same length; counts whose "
               "traffic differs change per 100 steps (orphans per 100 write steps). Red is a "
               "change for the worse, green for the better; no colour, no change.")

runs = data.report("runs", ctx.filters)
bucket = summaries.trend_bucket(ctx.filters.since, ctx.filters.until)
st.plotly_chart(figures.daily_trends(
    summaries.daily(runs, ctx.filters.since, ctx.filters.until, bucket), bucket),
    key="daily_trends")

left, right = st.columns(2)
with left:
    attribution = data.report("attribution", ctx.filters)
    if attribution.empty:
        st.info("No exhausted runs in this period: nobody to blame.")
    else:
        drill.chart(figures.culprits(attribution), "top_culprits", drill.culprit_runs)
with right:
    failures = data.report("failures", ctx.filters)
    drill.chart(figures.failures_by_step(failures, top=8, min_height=420),
                "overview_failures", drill.failing_runs)

st.subheader("Runs worth reviewing")
st.caption("Exhausted, overrun or failed runs, worst first. Select a row, or pick one below, "
           "to open its run view.")
review = summaries.runs_worth_reviewing(runs)
st.page_link("app_pages/runs.py", icon=":material/list:",
             label=f"All {fmt.plural(len(runs), 'run')} of this period, searchable, on the "
                   "Runs page"
                   f" ({fmt.count(now.exhausted_runs)} exhausted)",
             query_params=ctx.state.query_params())
if review.empty:
    st.info("No exhausted, overrun or failed runs in this period.")
else:
    def open_selected() -> None:
        # A callback, so that the selection opens the run once: the table keeps its selection
        # in session state, and coming back to this page must not open the run again.
        rows = st.session_state["review_table"].selection.rows
        if rows:
            st.session_state["_open_run"] = str(review.iloc[rows[0]]["run_id"])

    # The columns a reviewer picks a run by, fitting the page at 1400 px; the holder, the
    # budget's source and the rest are on the run view and the Runs page.
    # each run by the shortest start of its id no other run shares, as on the Runs page: the
    # whole id left no room for who spent the most at 900 px
    shown = summaries.numbered(review)[["run_id", "agent", "start", "outcome", "utilisation",
                                        "overrun_ms", "culprit"]].assign(
        start=review["start"].map(fmt.instant),
        run_id=data.run_id_starts([str(r) for r in review["run_id"]]))
    tables.table(
        fmt.readable_table(shown),
        hide_index=True, on_select=open_selected, selection_mode="single-row",
        key="review_table", height=tables.table_height(len(review)),
        column_config={
            "run_id": st.column_config.TextColumn(
                "run", help="the start of its run id that no other run shares: the run view "
                "and `budgetscope run` take it"),
            "start": st.column_config.TextColumn("start (UTC)"),
            "overrun_ms": st.column_config.TextColumn(
                "overrun", help="how far the run went past its deadline"),
            "culprit": st.column_config.TextColumn(
                "spent the most", help="the top-level step that spent the most, with its "
                "number among the run's steps: the culprit of an exhausted run, the largest "
                "consumer of another (docs/metrics.md §4)"),
        })
    run_to_open = st.session_state.pop("_open_run", None)
    if run_to_open:
        st.switch_page(links.RUN_PAGE, query_params=links.run_params(run_to_open, ctx.state))
    chosen = st.selectbox("Open a run", review["run_id"], key="review_pick",
                          format_func=summaries.describe_run(review))
    if chosen:
        links.run_link(chosen, ctx.state, label="Open this run")
