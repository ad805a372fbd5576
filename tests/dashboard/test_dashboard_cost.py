"""Tokens and dollars on the dashboard (docs/metrics.md §11), under Streamlit's AppTest on the
bundled sample (cost-fixtures' usage: cache reads, reasoning on o4-mini, the unpriced
triage-distill-v2, budget.total_usd on research-agent's runs): the Cost page, the Overview's
spend, the Runs page's search by dollars and tokens, the weekly page's row over all agents, and
the run view's cost block, each compared with what `budgetscope report` and `budgetscope run`
print for the same filters. The CSV downloads' bytes are the browser test's
(tests/browser/test_browser_narrow.py); here the frames they are made of are the reports."""

from __future__ import annotations

import json
import shutil
import textwrap
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from dashboard import cost_summaries, fmt, weekly_summaries
from queries import run_cost
from queries.filters import Filters
from queries.render import to_csv_bytes
from queries.run_spend import run_spend
from queries.run_view import load_run
from store import Change, apply, connect, derive_now
from tests.support import ui
from tests.support.apptest import (
    FILTERS,
    PARAMS,
    chart,
    metrics,
    open_page,
    plotly_array,
    query,
    trace,
)

RANGE = ["--since", ui.SINCE, "--until", ui.UNTIL]
ATTRIBUTION = ("step_key", "budget_share", "culprit_runs", "crosser_runs")


def cli_output(db: str, *arguments: str) -> bytes:
    result = CliRunner().invoke(cli, ["--db", db, *arguments])
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


def table(at: object, *columns: str) -> pd.DataFrame:
    """The page's first table whose columns begin with `columns` (AppTest keeps no key of a
    table that takes no selection)."""
    for frame in at.dataframe:  # type: ignore[attr-defined]
        if list(frame.value.columns)[:len(columns)] == list(columns):
            return frame.value.reset_index(drop=True)
    raise AssertionError(f"no table with the columns {columns}")


def _cost(db: str, filters: Filters = FILTERS) -> pd.DataFrame:
    return query(db, "cost", filters)


# ---- the Cost page --------------------------------------------------------------------------

def test_cost_page_headline_is_the_reports(db: str) -> None:
    at = open_page("cost")
    cost = _cost(db)
    shown = metrics(at)
    spent = sum((c for c in cost["cost_usd"] if c is not None), Decimal(0))
    incomplete = int((~cost["cost_complete"].astype(bool)).sum())
    assert incomplete > 0  # the sample's unpriced model and unmetered steps
    # a lower bound, rounded down to the cent for the tile; every digit in its help
    tile = Decimal(shown["Spend"].removeprefix("≥ $").replace(",", ""))
    assert tile <= spent < tile + Decimal("0.01")
    assert shown["Spend"] == fmt.usd_headline(spent, at_least=True)
    spend = next(m for m in at.metric if m.label == "Spend")
    assert fmt.escape_md(f"In full: {fmt.usd(spent, at_least=True)}.") in spend.help
    assert shown["Tokens"] == f"{int(cost['tokens'].sum()):,}"
    exhausted = cost["usd_exhausted"].fillna(False).astype(bool)
    budgeted = cost["usd_exhausted"].notna()
    assert shown["Dollar-exhausted runs"] == f"{int(exhausted.sum()):,}"
    assert shown["Dollar exhaustion rate"] == fmt.percent(exhausted.sum() / budgeted.sum())
    assert shown["Unpriced steps"] == f"{int(cost['unpriced_steps'].sum()):,}"
    # culprit and crosser compared as steps (#1 and #12 of model:gpt-4o are two calls):
    # the page's first tile is the query's cost_culprit_is_crosser_rate
    summary = query(db, "cost_attribution_summary").iloc[0]
    crossed = cost[exhausted & cost["cost_crosser"].notna()]
    same = crossed[crossed["cost_culprit"] == crossed["cost_crosser"]]
    assert len(same) / len(crossed) == pytest.approx(summary["culprit_is_crosser_rate"])
    assert len(crossed) == summary["crossed_runs"]
    tiles = [shown["Culprit is the crosser"], shown["Another call, same step"],
             shown["Another step"]]
    keys = [cost_summaries.step_parts(v)[1] for v in crossed["cost_culprit"]]
    crosser_keys = [cost_summaries.step_parts(v)[1] for v in crossed["cost_crosser"]]
    same_key = sum(a == b for a, b in zip(keys, crosser_keys, strict=True))
    assert tiles == fmt.percents_adding_up([len(same), same_key - len(same),
                                            len(crossed) - same_key])
    # the page's choice is in its address: dollars by default, said by nothing
    assert "dimension" not in at.query_params


def test_cost_utilisation_percentiles_are_duckdbs(db: str) -> None:
    """The distribution's percentiles per agent, against DuckDB's own quantile_cont over the
    cost report's rows (docs/metrics.md §5's interpolation), lines drawn at them."""
    at = open_page("cost")
    cost = _cost(db)
    rows = cost[cost["usd_budget"].notna()][["agent", "cost_utilisation"]]
    expected = duckdb.sql(
        "SELECT agent, count(*) AS runs, quantile_cont(cost_utilisation, 0.5) AS p50, "
        "quantile_cont(cost_utilisation, 0.9) AS p90, quantile_cont(cost_utilisation, 0.99) "
        "AS p99, max(cost_utilisation) AS max FROM rows GROUP BY agent ORDER BY agent").df()
    shown = table(at, "agent", "runs", "p50")
    assert list(shown["agent"]) == list(expected["agent"]) == ["research-agent",
                                                                "support-agent"]
    for column in ("runs", "p50", "p90", "p99", "max"):
        np.testing.assert_allclose(shown[column].astype(float), expected[column])
    figure = chart(at, "Cost utilisation histogram")
    positions = {round(s["x0"], 9) for s in figure["layout"]["shapes"]}
    assert {round(v, 9) for v in expected["p99"]} <= positions and 1.0 in positions
    bars = [t for t in figure["data"] if t.get("type") == "bar"]
    assert sum(plotly_array(t["y"]).sum() for t in bars) == len(rows)


def test_cost_attribution_is_the_report_and_its_bytes_the_clis(db: str) -> None:
    at = open_page("cost")
    attribution = query(db, "cost_attribution")
    pd.testing.assert_frame_equal(table(at, *ATTRIBUTION), attribution)
    bars = trace(chart(at, "Share of the dollar budget per step key (dollar-exhausted runs)"),
                 "budget share")
    spent = attribution[attribution["budget_share"] > 0]
    assert list(reversed(bars["y"])) == list(spent["step_key"])
    np.testing.assert_allclose(plotly_array(bars["x"])[::-1], spent["budget_share"])
    # what the download holds, and what the page says the command line gives
    assert to_csv_bytes(attribution) == cli_output(db, "report", "cost-attribution", *RANGE)
    commands = [c.value for c in at.code]
    assert any(f"report cost-attribution --since {ui.SINCE} --until {ui.UNTIL}" in c
               for c in commands), commands
    assert to_csv_bytes(_cost(db)) == cli_output(db, "report", "cost", *RANGE)
    assert to_csv_bytes(query(db, "models")) == cli_output(db, "report", "models", *RANGE)


def test_the_token_budget_is_a_link(db: str) -> None:
    """`dimension=tokens` in the address: the distribution and the attribution of the token
    budget, and the command line's `--dimension tokens`."""
    at = open_page("cost", {**PARAMS, "dimension": "tokens"})
    shown = metrics(at)
    cost = _cost(db)
    exhausted = cost["tokens_exhausted"].fillna(False).astype(bool)
    assert shown["Token-exhausted runs"] == f"{int(exhausted.sum()):,}"
    pd.testing.assert_frame_equal(table(at, *ATTRIBUTION),
                                  query(db, "token_attribution"))
    assert "Token utilisation histogram" in {
        json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")}
    assert any("report cost-attribution --dimension tokens" in c.value for c in at.code)
    assert to_csv_bytes(query(db, "token_attribution")) == cli_output(
        db, "report", "cost-attribution", "--dimension", "tokens", *RANGE)
    assert at.query_params["dimension"] in ("tokens", ["tokens"])
    # choosing dollars on the page writes the address back (no dimension: the default)
    at.segmented_control(key="cost_dimension").set_value("usd").run()
    assert "dimension" not in at.query_params
    assert "Dollar-exhausted runs" in metrics(at)


def test_weekly_spend_is_the_weekly_reports(db: str) -> None:
    at = open_page("cost")
    weekly = query(db, "weekly")
    figure = chart(at, "Weekly spend per agent against its weekly budget")
    drawn = {}
    for bars in figure["data"]:
        for week, value in zip(bars["x"], plotly_array(bars["y"]), strict=True):
            drawn[(bars["name"], week)] = value
    expected = {(agent, week): float(cost) for agent, week, cost in
                zip(weekly["agent"], weekly["week"], weekly["cost_usd"], strict=True)}
    assert drawn.keys() == expected.keys()
    for key, value in expected.items():
        assert drawn[key] == pytest.approx(value)
    assert not figure["layout"].get("shapes")  # the sample declares no weekly budget


def test_pricing_coverage_names_the_unpriced_model_and_its_command(db: str) -> None:
    at = open_page("cost")
    checked = json.loads(cli_output(db, "prices", "check", "--format", "json"))
    shown = table(at, "model", "provider", "steps")
    assert list(shown["model"]) == [row["model"] for row in checked] == ["triage-distill-v2"]
    assert list(shown["steps"]) == [row["steps"] for row in checked]
    assert checked[0]["command"] in [c.value for c in at.code]
    sources = table(at, "price_source", "spans").set_index("price_source")
    models = query(db, "models")
    unpriced = models[models["price_source"] == "unpriced"]
    assert sources.loc["no price", "cost_usd"] == "unknown"  # never $0
    assert sources.loc["no price", "spans"] == fmt.count(unpriced["spans"].sum())
    bundled = sum(models.loc[models["price_source"] == "bundled", "cost_usd"], Decimal(0))
    assert sources.loc["bundled price table", "cost_usd"] == fmt.usd(bundled)
    coverage = query(db, "pricing_coverage").iloc[0]
    assert metrics(at)["Model steps metered"] == fmt.percent(coverage["metered_share"])
    # model steps counted by hand from the steps of the range
    con = connect(db, read_only=True)
    try:
        bounds = FILTERS.parameters()
        steps, metered = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE NOT unmetered) FROM steps "
            "WHERE kind = 'model' AND run_start_ns >= $s AND run_start_ns < $u",
            {"s": bounds["since_ns"], "u": bounds["until_ns"]}).fetchone()
    finally:
        con.close()
    assert (coverage["model_steps"], coverage["metered_model_steps"]) == (steps, metered)
    pd.testing.assert_frame_equal(
        table(at, "model", "provider", "price_source").drop(columns=["model", "provider"]),
        models.drop(columns=["model", "provider"]))


def test_the_costliest_runs_open_their_run_view(db: str) -> None:
    at = open_page("cost")
    cost = _cost(db)
    costly = cost.assign(_c=cost["cost_usd"].map(float)).sort_values(
        ["_c", "run_id"], ascending=[False, True]).head(10)
    shown = table(at, "run", "agent", "cost")
    assert all(r.startswith(s) for r, s in zip(costly["run_id"], shown["run"], strict=True))
    incomplete = ~costly["cost_complete"].astype(bool).to_numpy()
    assert [c.startswith("≥ ") for c in shown["cost"]] == list(incomplete)


# ---- the Overview -------------------------------------------------------------------------

def test_overview_headline_gains_spend(db: str) -> None:
    at = open_page("overview")
    headline = query(db, "headline").iloc[0]
    cost = _cost(db)
    shown = metrics(at)
    spent = Decimal(int(headline["cost_nano"])).scaleb(-9)
    assert spent == sum(cost["cost_usd"], Decimal(0))
    assert shown["Spend"] == fmt.usd_headline(spent, at_least=True)
    assert shown["Dollar exhaustion rate"] == fmt.percent(headline["usd_exhaustion_rate"])
    assert shown["Tokens"] == f"{int(headline['tokens']):,}"
    assert shown["Unpriced steps"] == f"{int(headline['unpriced_steps']):,}"
    before = query(db, "headline", Filters.parse("2026-11-02", ui.SINCE)).iloc[0]
    spend = next(m for m in at.metric if m.label == "Spend")
    change = spent - Decimal(int(before["cost_nano"])).scaleb(-9)
    assert spend.delta == ("+" if change > 0 else "-") + fmt.usd_headline(abs(change))
    # the tile rounds; its help has the total and the change to every digit
    assert fmt.escape_md(f"In full: {fmt.usd(spent, at_least=True)}, {fmt.usd(abs(change))} "
                         f"{'more' if change > 0 else 'less'} than the previous period") \
        in spend.help


# ---- the weekly report's row over all agents ----------------------------------------------

def test_each_weeks_row_over_all_agents_sums_its_cost(db: str) -> None:
    at = open_page("weekly")
    shown = at.dataframe[2].value.reset_index(drop=True)
    weekly = query(db, "weekly")
    cost = _cost(db)
    starts = pd.to_datetime(cost["start"], utc=True)
    whole = shown[shown["agent"] == weekly_summaries.ALL_AGENTS].reset_index(drop=True)
    for (_, row), (week, of_week) in zip(whole.iterrows(), weekly.groupby("week"),
                                         strict=True):
        assert row["cost_usd"] == sum(of_week["cost_usd"], Decimal(0))
        assert row["tokens"] == of_week["tokens"].sum()
        assert row["usd_exhaustion_rate"] == pytest.approx(
            of_week["usd_exhausted_runs"].sum() / of_week["usd_budgeted_runs"].sum())
        start, end = weekly_summaries.week_bounds(week)
        in_week = cost[(starts >= start) & (starts < end)]
        assert row["cost_utilisation_p90"] == pytest.approx(
            in_week["cost_utilisation"].dropna().quantile(0.9))
        top = query(db, "cost_attribution", Filters(max(start, FILTERS.since),
                                                    min(end, FILTERS.until)))
        top = top[top["budget_share"] > 0].iloc[0]
        assert (row["top_cost_culprit"], row["top_cost_culprit_share"]) == (
            top["step_key"], pytest.approx(top["budget_share"]))
        assert row["weekly_budget_usd"] is None  # not every agent has one


def test_one_agents_row_over_all_agents_is_its_own(db: str) -> None:
    """Filtered to one agent, each week's row over all agents is that agent's row, cost
    columns included (the weekly report's own definitions, docs/metrics.md §11.9)."""
    at = open_page("weekly", {**PARAMS, "agent": "research-agent"})
    shown = at.dataframe[3].value.reset_index(drop=True)
    columns = ["usd_budgeted_runs", "usd_exhausted_runs", "usd_exhaustion_rate",
               "cost_utilisation_p50", "cost_utilisation_p90", "cost_utilisation_p99",
               "top_cost_culprit", "top_cost_culprit_share", "token_budgeted_runs",
               "token_exhausted_runs", "token_utilisation_p90"]
    whole = shown[shown["agent"] == weekly_summaries.ALL_AGENTS][columns].reset_index(drop=True)
    agent = shown[shown["agent"] != weekly_summaries.ALL_AGENTS][columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(whole, agent, check_dtype=False)
    assert whole["usd_exhausted_runs"].sum() > 0


def shown_text(frame: object) -> pd.DataFrame:
    """A table's cells as the page shows them: the Styler's display values (fmt.readable_table)
    that Streamlit sends beside the raw ones."""
    from streamlit import dataframe_util

    return dataframe_util.convert_arrow_bytes_to_pandas_df(
        frame.proto.arrow_data.styler.display_values  # type: ignore[attr-defined]
    ).reset_index(drop=True)


def test_a_weeks_cost_with_an_incomplete_run_reads_as_a_lower_bound(db: str) -> None:
    """docs/metrics.md §11.4: a week whose runs include one with an incomplete cost spent at
    least its known cost; the weekly page's spend table says `≥ $x` there, as `report weekly
    --format table` does, and the plain amount where every run's cost is complete. The raw
    values underneath (sorting, copying) are the report's numbers. research-agent's W45 has
    no incomplete run in the sample, its W46 eleven."""
    at = open_page("weekly", {"range": "custom", "since": "2026-11-02", "until": "2026-11-16",
                              "agent": "research-agent"})
    spend = at.dataframe[2]
    raw = spend.value.reset_index(drop=True)
    text = shown_text(spend)
    incomplete = raw["incomplete_cost_runs"] > 0
    assert incomplete.any() and not incomplete.all()  # the sample has both kinds of week
    assert list(text["cost_usd"]) == [("≥ " if lower else "") + fmt.usd(cost) for cost, lower
                                      in zip(raw["cost_usd"], incomplete, strict=True)]
    assert list(text["overrun_usd"]) == [
        fmt.NO_VALUE if fmt.missing(v) else ("≥ " if lower else "") + fmt.usd(v)
        for v, lower in zip(raw["overrun_usd"], incomplete, strict=True)]
    assert isinstance(raw["cost_usd"][0], Decimal)


@pytest.fixture
def weekly_budgets(tmp_path: Path, sample: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A copy of the sample with a weekly dollar budget declared for every agent."""
    copy = tmp_path / "weekly.duckdb"
    shutil.copy(sample, copy)
    con = connect(str(copy))
    try:
        for agent, usd in (("billing-agent", 1), ("research-agent", 10),
                           ("support-agent", 3), ("triage-agent", 1)):
            apply(con, Change("set", agent, usd_per_week_nano=usd * 10**9))
        derive_now(con)
    finally:
        con.close()
    monkeypatch.setenv("BUDGETSCOPE_DB", str(copy))
    return str(copy)


def test_weekly_budgets_are_lines_and_sum_over_agents(weekly_budgets: str) -> None:
    at = open_page("cost")
    figure = chart(at, "Weekly spend per agent against its weekly budget")
    assert sorted(s["y0"] for s in figure["layout"]["shapes"]) == [1, 1, 3, 10]
    at = open_page("weekly")
    shown = at.dataframe[2].value.reset_index(drop=True)
    whole = shown[shown["agent"] == weekly_summaries.ALL_AGENTS]
    assert set(whole["weekly_budget_usd"]) == {Decimal(15)}
    for _, row in whole.iterrows():
        assert row["weekly_budget_utilisation"] == pytest.approx(float(row["cost_usd"]) / 15)


# ---- the Runs page --------------------------------------------------------------------------

def test_runs_page_finds_by_dollars_what_the_cli_finds(db: str) -> None:
    at = open_page("runs", {**PARAMS, "usd_exhausted": "yes", "sort": "cost_usd",
                            "order": "desc"})
    listed = json.loads(cli_output(db, "report", "runs", *RANGE, "--usd-exhausted", "--sort",
                                   "cost_usd:desc", "--format", "json"))
    shown = table(at, "run", "run_id")
    assert list(shown["run_id"]) == [r["run_id"] for r in listed]
    assert list(shown["cost"]) == [("" if r["cost_complete"] else "≥ ")
                                   + fmt.usd(Decimal(str(r["cost_usd"]))) for r in listed]
    # cost and tokens are under More columns (no room beside outcome, utilisation and who
    # spent the most at 900 px), open when the search is by dollars or tokens
    more = next(e for e in at.expander if e.label.startswith("More columns"))
    assert more.proto.expanded
    plain = open_page("runs", PARAMS)
    assert not next(e for e in plain.expander
                    if e.label.startswith("More columns")).proto.expanded
    # a cost that is a lower bound, between two amounts
    at = open_page("runs", {**PARAMS, "cost": "incomplete", "cmin": "0.05", "cmax": "0.5"})
    listed = json.loads(cli_output(db, "report", "runs", *RANGE, "--cost-incomplete",
                                   "--cost-from", "0.05", "--cost-below", "0.5",
                                   "--format", "json"))
    shown = table(at, "run", "run_id")
    assert sorted(shown["run_id"]) == sorted(r["run_id"] for r in listed) and len(listed) > 0
    assert all(c.startswith("≥ ") for c in shown["cost"])
    assert at.query_params["cmin"] in ("0.05", ["0.05"])


# ---- the run view -----------------------------------------------------------------------------

def _run_of(db: str, which: str) -> str:
    cost = _cost(db)
    if which == "culprit is not the crosser":
        crossed = cost[cost["usd_exhausted"].fillna(False).astype(bool)
                       & cost["cost_crosser"].notna()]
        found = crossed[crossed["cost_culprit"] != crossed["cost_crosser"]]
    else:  # a lower bound: an unpriced model
        found = cost[(cost["unpriced_steps"] > 0) & (cost["tokens"] > 0)]
    return str(found.iloc[0]["run_id"])


def _cli_block(db: str, run_id: str) -> str:
    """`budgetscope run`'s cost block, its lines joined (the terminal wraps them at 80)."""
    text = cli_output(db, "run", run_id, "--width", "200").decode()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Spent "))
    return " ".join(" ".join(line.split()) for line in lines[start:lines.index("", start)])


def test_run_view_cost_block_where_the_culprit_is_not_the_crosser(db: str) -> None:
    run_id = _run_of(db, "culprit is not the crosser")
    at = open_page("run", {**PARAMS, "run": run_id})
    con = connect(db, read_only=True)
    try:
        run = load_run(con, run_id).summary
    finally:
        con.close()
    shown = metrics(at)
    assert shown["Spent"] == fmt.usd_nano(run["cost_nano"])
    assert shown["Dollar budget"] == fmt.usd_nano(run["usd_budget_nano"])
    assert shown["Cost utilisation"] == fmt.percent(run["cost_utilisation"])
    block = next(m.value for m in at.markdown if m.value.startswith("**Spent:**"))
    answers = dict(run_cost.cost_answers(run))
    for label in ("Spent", "Cost culprit", "Crosser", "Tokens"):
        assert f"**{label}:** {fmt.escape_md(answers[label])}" in block
    # the same sentences `budgetscope run` prints
    terminal = _cli_block(db, run_id)
    for label in ("Spent", "Cost culprit", "Crosser"):
        assert f"{label} {answers[label]}" in terminal, (label, terminal)
    assert "It is not the cost culprit" in answers["Crosser"] or \
        "another call of the same step key" in answers["Crosser"]
    # the cumulative spend: the star at the call that reached the budget, of the crosser's
    # step, with the spend just before and after it as the run's columns say
    figure = chart(at, "Cumulative spend against the dollar budget")
    star = trace(figure, "the call that reached the budget (crosser)")
    after = run["cost_after_crossing_nano"] / 1e9
    assert plotly_array(star["y"])[0] == pytest.approx(after)
    assert (f"{fmt.usd_nano(run['cost_before_crossing_nano'])} → "
            f"{fmt.usd_nano(run['cost_after_crossing_nano'])}") in star["customdata"][0]
    assert f"#{int(run['cost_crosser_step'])} " in star["customdata"][0]
    budget = [s for s in figure["layout"]["shapes"] if s.get("type") == "line"]
    assert [s["y0"] for s in budget] == [pytest.approx(run["usd_budget_nano"] / 1e9)]
    line = trace(figure, "known cost so far")
    assert plotly_array(line["y"])[-1] == pytest.approx(run["cost_nano"] / 1e9)
    # per step: its tokens split, cost and source, the sum of the steps' own costs
    steps = table(at, "#", "step", "in")
    assert list(steps.columns) == ["#", "step", "in", "cache read", "cache write", "out",
                                   "reasoning", "tokens", "cost", "from"]
    assert set(steps["from"]) == {"bundled price"}


def test_run_view_says_at_least_and_names_the_unpriced_model(db: str) -> None:
    run_id = _run_of(db, "unpriced")
    at = open_page("run", {**PARAMS, "run": run_id})
    shown = metrics(at)
    assert shown["Spent"].startswith("≥ $")
    block = next(m.value for m in at.markdown if m.value.startswith("**Spent:**"))
    assert "triage\\-distill\\-v2" in block  # named, escaped for Markdown
    assert "budgetscope prices set MODEL" in block.replace("\\", "")
    steps = table(at, "#", "step", "in")
    unpriced = steps[steps["from"] == "no price"]
    assert len(unpriced) > 0 and set(unpriced["cost"]) == {"unknown"}  # never $0
    con = connect(db, read_only=True)
    try:
        calls = run_spend(con, load_run(con, run_id).summary).unpriced_calls
    finally:
        con.close()
    figure = chart(at, "Cumulative spend against the dollar budget")
    marked = trace(figure, "a call with no price (cost unknown)")
    assert len(plotly_array(marked["y"])) == calls >= len(unpriced)
    assert "no price: cost unknown" in marked["customdata"][0]
    terminal = _cli_block(db, run_id)
    assert "≥ $" in terminal and "triage-distill-v2" in terminal


def test_a_run_without_usage_or_a_cost_budget_has_no_cost_block(tmp_path: Path,
                                                                 monkeypatch) -> None:
    db = tmp_path / "plain.duckdb"
    con = connect(str(db))
    try:
        from tests.support.trace_builder import TraceBuilder, store
        b = TraceBuilder()
        run = b.run(0, 9_000, 20_000, gen__ai_agent_name="plain")
        b.step(run, "tool", "fetch", 1_000, 7_000)
        store(con, b.finished())
        run_id = b.trace_id(run)
    finally:
        con.close()
    monkeypatch.setenv("BUDGETSCOPE_DB", str(db))
    at = open_page("run", {"range": "all", "run": run_id})
    assert "Spent" not in metrics(at)
    assert not [c for c in at.get("plotly_chart")
                if "Cumulative" in json.loads(c.proto.spec)["layout"]["title"]["text"]]


def test_cost_block_text_is_inert_markdown() -> None:
    """A model name from a span goes through escape_md before the block's Markdown."""
    run = {"run_id": "r", "cost_nano": 5, "cost_complete": False, "usd_budget_nano": None,
           "unpriced_models": ["[x](javascript:alert(1))"], "unpriced_steps": 1}
    text = dict(run_cost.cost_answers(run))["Spent"]
    shown = fmt.escape_md(text)
    assert "[x](javascript" not in shown and "\\[x\\]\\(javascript" in shown
    assert textwrap.shorten(shown, 200)  # one line


def test_the_runs_search_by_dollars_and_tokens_is_a_link() -> None:
    from dashboard import run_search_params

    search, _, problems = run_search_params.from_params({
        "usd_exhausted": "yes", "tokens_exhausted": "no", "cost": "incomplete",
        "cmin": "$0.05", "cmax": "1.50", "sort": "cost_usd"})
    assert not problems
    assert (search.usd_exhausted, search.tokens_exhausted, search.cost_complete) == (
        True, False, False)
    assert (search.cost_min, search.cost_max) == (Decimal("0.05"), Decimal("1.50"))
    again, _, _ = run_search_params.from_params(run_search_params.to_params(search))
    assert again == search
    _, _, problems = run_search_params.from_params({"cmin": "-1", "cost": "cheap"})
    assert problems == ["unknown cost 'cheap'; ignored (complete or incomplete)",
                        "cmin='-1' is not an amount of dollars; ignored"]


def test_the_budget_lines_leave_the_spend_and_the_bars_readable() -> None:
    """Seen in the browser test's shots: the budget share chart's `budget` label was written
    on the top bar (a key past 100 %), and a run just past its dollar budget ($0.3003 of
    $0.30) ran under the budget line from the crossing to its next call, as if its spend had
    stopped. The label sits above the plot; the budget line is drawn under the spend."""
    from dashboard import cost_figures
    from queries.run_spend import spend_of

    shares = cost_figures.budget_shares(pd.DataFrame({
        "step_key": ["model:gpt-4o", "tool:search"], "budget_share": [1.066, 0.02],
        "culprit_runs": [3, 0], "crosser_runs": [3, 0], "exhausted_runs": [3, 2]}))
    label = next(a for a in shares.layout.annotations if a.text == "budget")
    assert (label.x, label.yref, label.y, label.yanchor) == (1.0, "paper", 1.0, "bottom")
    second = 1_000_000_000  # ns
    calls = pd.DataFrame({
        "span_id": ["a", "b", "c"], "top_step_id": ["a", "b", "c"],
        "start_ns": [0, 2 * second, 8 * second],
        "end_ns": [second, 3 * second, 9 * second], "model": ["gpt-4o"] * 3,
        "tokens": [100, 100, 100], "cost_nano": [200_000_000, 100_337_500, 10_000_000],
        "cost_source": ["bundled"] * 3})
    spend = spend_of(calls, 300_000_000)
    assert spend.crossing == 1  # $0.2 → $0.3003375
    steps = pd.DataFrame({"span_id": ["a", "b", "c"], "number": [1, 2, 3],
                          "step_key": ["model:gpt-4o"] * 3})
    figure = cost_figures.cumulative_spend(spend, 0, steps, "a")
    budget = next(s for s in figure.layout.shapes if s.type == "line" and s.y0 == 0.3)
    assert budget.layer == "below"
