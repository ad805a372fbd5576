"""Runs: every run in the filters, searchable, sortable and paged; the page a chart's bar or
cell opens, filtered to the runs behind it (dashboard/run_search_params.py)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import (
    colors,
    data,
    fmt,
    links,
    page_context,
    run_search_params,
    sidebar,
    summaries,
    tables,
)
from dashboard.run_search_params import OUTCOMES, PAGE_SIZE
from queries.run_search import SORTABLE, WRITES, RunSearch

ctx = page_context.current()
st.title("Runs")
ss = st.session_state
_LAST = "_run_search_last"
_ANY = ""

url_search, url_page, problems = run_search_params.from_params(st.query_params.to_dict())
url_params = run_search_params.to_params(url_search, url_page)
if url_params != ss.get(_LAST) or ctx.arrived:
    # A link from a chart, or the back button: the URL wins over the widgets. On the page's
    # first run the widgets are set even to the values they hold (sidebar.arrived_on_page).
    ss["rs_outcome"] = list(url_search.outcomes)
    ss["rs_exhausted"] = {None: _ANY, True: "yes", False: "no"}[url_search.exhausted]
    ss["rs_culprit"] = url_search.culprit or _ANY
    ss["rs_holder"] = url_search.holder or _ANY
    ss["rs_step"] = url_search.step_key or _ANY
    ss["rs_class"] = url_search.step_class or _ANY
    ss["rs_writes"] = url_search.writes or _ANY
    ss["rs_id"] = url_search.id_prefix or ""
    ss["rs_umin"] = url_params.get("umin", "")
    ss["rs_umax"] = url_params.get("umax", "")
    ss["rs_usd_exhausted"] = {None: _ANY, True: "yes", False: "no"}[url_search.usd_exhausted]
    ss["rs_tokens_exhausted"] = {None: _ANY, True: "yes", False: "no"}[
        url_search.tokens_exhausted]
    ss["rs_cost"] = url_params.get("cost", _ANY)
    ss["rs_cmin"] = url_params.get("cmin", "")
    ss["rs_cmax"] = url_params.get("cmax", "")
    ss["rs_sort"] = url_search.sort
    ss["rs_order"] = {None: _ANY, True: "desc", False: "asc"}[url_search.descending]
    ss["rs_page"] = url_page
for problem in problems:
    st.warning(fmt.escape_md(problem))

runs = data.report("runs", ctx.filters)
steps = data.report("failures", ctx.filters)


def _options(values: pd.Series, chosen: str) -> list[str]:
    """Choices for a selectbox: any, then the values there are, and a value a link named even
    when the filters hold no such run (so the link's search is shown, not silently dropped).
    Whole-column operations: a value at a time took ~18 ms a column of every rerun on a week
    of 7.5k runs, ~90 ms on 35k."""
    options = [_ANY, *sorted(values.dropna().astype(str).unique())]
    return options if not chosen or chosen in options else [*options, chosen]


def _any(label: str) -> object:
    return lambda value: f"any {label}" if value == _ANY else value


# Four filters a row: five in a row were cut to "Choo" and "eithe" in a 900 px window. The
# three budgets' exhaustion side by side (time, dollars, tokens: docs/metrics.md §4, §11.5).
first = st.columns(4)
first[0].multiselect("Outcome", OUTCOMES, key="rs_outcome", placeholder="any outcome",
                     help="budget.run.outcome as the agent stated it; none: not stated")
first[1].selectbox("Exhausted", [_ANY, "yes", "no"], key="rs_exhausted",
                   format_func=lambda v: "either" if v == _ANY else v,
                   help="exhausted its time budget (docs/metrics.md §4)")
first[2].selectbox("Dollar-exhausted", [_ANY, "yes", "no"], key="rs_usd_exhausted",
                   format_func=lambda v: "either" if v == _ANY else v,
                   help="spent its dollar budget, or was stopped at it; no: budgeted in "
                        "dollars and within it (docs/metrics.md §11.5)")
first[3].selectbox("Token-exhausted", [_ANY, "yes", "no"], key="rs_tokens_exhausted",
                   format_func=lambda v: "either" if v == _ANY else v,
                   help="used its token budget, or was stopped at it; no: budgeted in tokens "
                        "and within it")
second = st.columns(4)
second[0].selectbox("Spent the most", _options(runs["culprit"], ss["rs_culprit"]),
                    key="rs_culprit", format_func=_any("step key"),
                    help="the top-level step that spent the most time: the culprit of an "
                    "exhausted run (docs/metrics.md §4)")
second[1].selectbox("Holder", _options(runs["holder"], ss["rs_holder"]), key="rs_holder",
                    format_func=_any("holder"), help="the top-level step that held the "
                    "deadline (docs/metrics.md §4)")
second[2].selectbox("Holds a step", _options(steps["step_key"], ss["rs_step"]), key="rs_step",
                    format_func=_any("step key"), help="runs with a step of this key, nested "
                    "steps included")
second[3].selectbox("Holds a step of class", [_ANY, *colors.STEP_CLASSES], key="rs_class",
                    format_func=lambda v: "any class" if v == _ANY else colors.CLASS_LABELS[v])
third = st.columns(4)
third[0].selectbox("Holds a write", [_ANY, *WRITES], key="rs_writes",
                   format_func=lambda v: "any or none" if v == _ANY else v,
                   help="runs with an uncertain write, a write read back (reconciled), or an "
                        "orphan write (uncertain and never read back; docs/metrics.md §6)")
third[1].text_input("Run id starts with", key="rs_id", placeholder="e.g. 5fa7a0c0")
third[2].selectbox("Sort by", list(SORTABLE), key="rs_sort")
third[3].selectbox("Order", [_ANY, "desc", "asc"], key="rs_order",
                   format_func=lambda v: {"": "usual", "desc": "descending",
                                          "asc": "ascending"}[v],
                   help="usual: the newest, the largest first (alphabetical for run id and "
                        "agent)")
fourth = st.columns(4)
fourth[0].text_input("Utilisation from (%)", key="rs_umin", placeholder="0")
fourth[1].text_input("Utilisation below (%)", key="rs_umax", placeholder="no limit")
fourth[2].text_input("Cost from ($)", key="rs_cmin", placeholder="0",
                     help="the run's known cost, in dollars (a lower bound when incomplete)")
fourth[3].text_input("Cost below ($)", key="rs_cmax", placeholder="no limit")
fifth = st.columns([1, 1, 2])
fifth[0].selectbox("Cost", [_ANY, *run_search_params.COST_COMPLETE], key="rs_cost",
                   format_func=lambda v: {_ANY: "complete or not", "complete": "complete",
                                          "incomplete": "a lower bound (≥)"}[v],
                   help="a lower bound: a call with no price, or a model step that sent no "
                        "usage and may have been billed (docs/metrics.md §11.4)")

typed, page, typed_problems = run_search_params.from_params({
    "outcome": ",".join(ss["rs_outcome"]), "exhausted": ss["rs_exhausted"],
    "culprit": ss["rs_culprit"], "holder": ss["rs_holder"], "step": ss["rs_step"],
    "class": ss["rs_class"], "writes": ss["rs_writes"],
    "id": ss["rs_id"].strip(), "umin": ss["rs_umin"].strip(), "umax": ss["rs_umax"].strip(),
    "usd_exhausted": ss["rs_usd_exhausted"], "tokens_exhausted": ss["rs_tokens_exhausted"],
    "cost": ss["rs_cost"], "cmin": ss["rs_cmin"].strip(), "cmax": ss["rs_cmax"].strip(),
    "sort": ss["rs_sort"], "order": ss["rs_order"], "page": str(ss.get("rs_page", 1))})
for problem in typed_problems:
    st.warning(fmt.escape_md(problem))
search: RunSearch = typed
# A search by dollars or tokens (check's cost breaches link to one) opens More columns, where
# cost and tokens are: the table above has no room for them at 900 px.
_money_search = (search.usd_exhausted is not None or search.tokens_exhausted is not None
                 or search.cost_complete is not None or search.cost_min is not None
                 or search.cost_max is not None or search.sort in ("cost_usd", "tokens"))
if run_search_params.to_params(search) != run_search_params.to_params(url_search):
    page = 1  # a new search starts on its first page

found = data.find_runs(ctx.filters, search.page(page, PAGE_SIZE))
pages = max(1, -(-found.total // PAGE_SIZE))
page = min(page, pages)
ss["rs_page"] = page
params = run_search_params.to_params(search, page)
ss[_LAST] = params
sidebar.write_url(ctx.state, params, owned=frozenset(run_search_params.KEYS))

fifth[1].number_input("Page", min_value=1, max_value=pages, step=1, key="rs_page")
shown_from = (page - 1) * PAGE_SIZE + 1 if found.total else 0
shown_to = shown_from + len(found.runs) - 1 if found.total else 0
matching = "run matches" if found.total == 1 else "runs match"
fifth[2].markdown(f"**{fmt.count(found.total)}** {matching} · showing "
                  f"{fmt.count(shown_from)}–{fmt.count(shown_to)} · page {page} of {pages}")

if found.runs.empty:
    st.info("No run matches this search in " + fmt.escape_md(ctx.state.label(ctx.now)) + ".")
    st.stop()

shown = summaries.numbered(found.runs)
table = shown.assign(
    budget=shown["budget_ms"].map(fmt.duration),
    elapsed=shown["elapsed_ms"].map(fmt.duration),
    utilisation=shown["utilisation"].map(fmt.percent),
    culprit_share=shown["culprit_share"].map(fmt.percent),
    overrun=shown["overrun_ms"].map(fmt.duration),
    outcome=shown["outcome"].map(fmt.text),
    exhausted=shown["exhausted"].map(lambda v: fmt.NO_VALUE if fmt.missing(v)
                                     else ("yes" if v else "no")),
    budget_source=shown["budget_source"].map(fmt.text),
    # a run measured from its earliest span because its root never arrived (docs/metrics.md
    # §8 root_missing): marked, so its numbers are read with that in mind
    root_missing=shown["root_missing"].map(lambda v: "missing" if bool(v) else ""),
    # dollars as the CLI's table writes them, `≥` before a lower bound (docs/metrics.md §11.4)
    cost=[fmt.usd(cost, at_least=not fmt.missing(complete) and not bool(complete))
          for cost, complete in zip(shown["cost_usd"], shown["cost_complete"], strict=True)],
    tokens=shown["tokens"].map(fmt.count),
)[["run_id", "agent", "start", "outcome", "exhausted", "budget", "elapsed", "utilisation",
   "culprit", "culprit_share", "holder", "overrun", "budget_source", "root_missing", "cost",
   "tokens"]]
table["start"] = table["start"].map(fmt.instant)
# The id as the shortest start no other run shares (8 characters or more): what the run view
# and `budgetscope run` open, and room for what on-call reads at 900 px (outcome, utilisation,
# who spent the most); the whole id is in the run view and under "More columns".
table.insert(0, "run", data.run_id_starts([str(r) for r in table["run_id"]]))
labels = {"run_id": st.column_config.TextColumn("run id"),
          "run": st.column_config.TextColumn(
              "run", help="the start of its run id that no other run shares: the run view "
              "and `budgetscope run` take it; the whole id is under More columns"),
          "start": st.column_config.TextColumn("start (UTC)"),
          "culprit": st.column_config.TextColumn(
              "spent the most", help="the top-level step that spent the most, with its number "
              "among the run's steps: the culprit of an exhausted run, the largest consumer "
              "of another (docs/metrics.md §4)"),
          "culprit_share": st.column_config.TextColumn(
              "its share", help="that step's consumption / the budget"),
          "holder": st.column_config.TextColumn(
              "holder", help="the step running when the deadline fired, else the last to "
              "start; the same number as the step that spent the most: the same call"),
          "overrun": st.column_config.TextColumn(
              "overrun", help="how far the run went past its deadline"),
          "budget_source": st.column_config.TextColumn(
              "budget from", help="span: the run's own budget.total_ms; declared: its agent's "
              "declared budget, or the default (Budgets page)"),
          "exhausted": st.column_config.TextColumn("exhausted", width=68),
          "root_missing": st.column_config.TextColumn(
              "root", width=40, help="missing: the trace's root span never arrived, so the "
              "run is measured from its earliest span"),
          "cost": st.column_config.TextColumn(
              "cost", help="the run's known cost; ≥: a lower bound (a call with no price, or "
              "a model step with no usage that may have been billed; docs/metrics.md §11.4)"),
          "tokens": st.column_config.TextColumn(
              "tokens", help="input (cache included) + output (reasoning included) of its "
              "metered calls (docs/metrics.md §11.1)")}
height = min(38 + 35 * len(table), 1790)
# The columns runs are told apart by, fitting the page at 900 px (with cost beside them the
# grid was 825 px in a 738 px box at 900: cost was cut at the edge); the rest, cost and tokens
# first, are one click away.
event = tables.table(table, hide_index=True, key="runs_table", on_select="rerun",
                     selection_mode="single-row", height=height, column_config=labels,
                     column_order=["run", "agent", "start", "outcome", "exhausted",
                                   "utilisation", "culprit"])
st.caption("Select a row to open that run.")
missing_roots = int(shown["root_missing"].astype(bool).sum())
if missing_roots:
    st.caption(f"{fmt.plural(missing_roots, 'run')} on this page measured from its earliest "
               "span: its root never arrived (root, under More columns).")
with st.expander("More columns: the whole run id, cost, tokens, budget, elapsed, its share, "
                 "holder, overrun, budget source, root", expanded=_money_search):
    tables.table(table, hide_index=True, key="runs_more_table", height=height,
                 column_config=labels,
                 column_order=["run_id", "cost", "tokens", "budget", "elapsed", "culprit",
                               "culprit_share", "holder", "overrun", "budget_source",
                               "root_missing"])
chosen = event.selection.rows if event is not None else []
if chosen:
    run_id = str(table.iloc[chosen[0]]["run_id"])
    st.switch_page(links.RUN_PAGE, query_params=links.run_params(run_id, ctx.state))
