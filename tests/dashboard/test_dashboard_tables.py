"""The dashboard's tables under AppTest, on the bundled sample: each shows the report's
own numbers (those of `queries`), its headers say what each column counts, its columns are
chosen so that it fits a 1400 px window (the rest one click away, not lost), and a missing value
is the one no-value mark. The browser tests (tests/support/page_fit.py's checks, run by
tests/browser/test_browser_narrow.py and test_browser_pages_fit.py) check the same pages drawn
in Chromium."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import fmt, weekly_summaries
from queries import reports
from queries.filters import Filters
from store import connect
from tests.support import ui

FILTERS = Filters.parse(ui.SINCE, ui.UNTIL)
PARAMS = {"range": "custom", "since": ui.SINCE, "until": ui.UNTIL}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return ui.sample_db(tmp_path_factory)


@pytest.fixture(autouse=True)
def _database(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUDGETSCOPE_DB", db)


def query(db: str, name: str, filters: Filters = FILTERS) -> pd.DataFrame:
    con = connect(db, read_only=True)
    try:
        return getattr(reports, name)(con, filters)
    finally:
        con.close()


def open_page(page: str, params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    at.query_params.update(PARAMS if params is None else params)
    at.switch_page(f"app_pages/{page}.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def labels(table: object) -> dict[str, str]:
    """Column name -> the header the table shows for it."""
    config = json.loads(table.proto.columns or "{}")  # type: ignore[attr-defined]
    return {name: spec.get("label", name) for name, spec in config.items()}


def shown(table: object) -> list[str]:
    return list(table.proto.column_order) or list(table.value.columns)  # type: ignore[attr-defined]


def test_weekly_tables_are_the_report_with_headers_that_say_what_they_count(db: str) -> None:
    at = open_page("weekly")
    weekly = query(db, "weekly")
    runs_side, steps_side, spend, usd_budgets, token_budgets = at.dataframe[:5]
    tables = (runs_side, steps_side, spend, usd_budgets, token_budgets)
    for table in tables:
        shown_rows = table.value.reset_index(drop=True)
        # each week's row over all agents first, then the report's own rows of that week
        agents = shown_rows[shown_rows["agent"] != weekly_summaries.ALL_AGENTS].reset_index(
            drop=True)
        pd.testing.assert_frame_equal(agents.drop(columns="week"), weekly.drop(columns="week"))
        # the week names its days, and a partial week says so, in every table
        for label, week, partial in zip(agents["week"], weekly["week"],
                                        weekly["partial_week"], strict=True):
            assert label.startswith(f"W{week[-2:]} ") and label.endswith("*") == partial
        assert table.proto.placeholder == fmt.NO_VALUE
    # Between them the tables show every column of the CSV (partial_week in the week): the
    # cost columns (docs/metrics.md §11.9) in three of their own, none over ten columns wide.
    assert set().union(*(shown(table) for table in tables)) | {"partial_week"} == set(
        weekly.columns)
    assert max(len(shown(table)) for table in tables) <= 11
    assert labels(spend)["cost_usd"] == "cost"
    assert labels(usd_budgets)["top_cost_culprit"] == "largest $ share"
    heads = labels(runs_side)
    assert heads["runs"] == "runs (all)"
    assert heads["exhaustion_rate"] == "exh. ÷ budgeted"
    assert heads["top_culprit"] == "largest share"
    # ... and each header's tooltip names the CSV column it shows.
    config = json.loads(runs_side.proto.columns)
    for name in weekly.columns:
        if name != "week":
            assert config[name]["help"].endswith(f"CSV column: {name}"), (name, config[name])
    assert heads["budgeted_runs"] == "budgeted"
    assert labels(steps_side)["reconciliation_rate"] == "reconciled ÷ writes"
    # No header shows a bare CSV name that would say something else (`runs` counts
    # every run while the exhaustion rate divides by the budgeted ones).
    headers = {labels(t).get(c, c) for t in (runs_side, steps_side) for c in shown(t)}
    assert "runs" not in headers and "exhaustion_rate" not in headers, headers
    # The sample's weekly runs add up to the period's runs, budgeted or not.
    assert weekly["runs"].sum() == len(query(db, "runs"))


def test_each_week_has_a_row_over_all_agents(db: str) -> None:
    """The weekly page showed no row per week over every agent: its counts are the agents'
    sums, its rates and percentiles those of the week's runs, its largest share the
    attribution report's for the week (each by docs/metrics.md §7)."""
    at = open_page("weekly")
    table = at.dataframe[0].value.reset_index(drop=True)
    weekly = query(db, "weekly")
    runs = query(db, "runs")
    whole = table[table["agent"] == weekly_summaries.ALL_AGENTS]
    assert len(whole) == weekly["week"].nunique()
    for (_, row), (week, of_week) in zip(whole.iterrows(), weekly.groupby("week"),
                                         strict=True):
        assert row["runs"] == of_week["runs"].sum()
        assert row["exhausted_runs"] == of_week["exhausted_runs"].sum()
        assert row["exhaustion_rate"] == pytest.approx(
            of_week["exhausted_runs"].sum() / of_week["budgeted_runs"].sum())
        start, end = weekly_summaries.week_bounds(week)
        in_week = runs[(pd.to_datetime(runs["start"], utc=True) >= start)
                       & (pd.to_datetime(runs["start"], utc=True) < end)]
        assert row["utilisation_p99"] == pytest.approx(
            in_week["utilisation"].dropna().quantile(0.99))
        since = max(start, FILTERS.since)
        until = min(end, FILTERS.until)
        top = query(db, "attribution", Filters(since, until)).iloc[0]
        assert (row["top_culprit"], row["top_culprit_share"]) == (
            top["step_key"], pytest.approx(top["budget_share"]))


def test_utilisation_runs_say_budgeted(db: str) -> None:
    at = open_page("utilisation")
    table = at.dataframe[0]
    pd.testing.assert_frame_equal(table.value.reset_index(drop=True), query(db, "utilisation"))
    assert labels(table)["runs"] == "budgeted runs"
    assert "runs" not in {labels(table).get(c, c) for c in shown(table)}
    runs = query(db, "runs")
    assert table.value["runs"].sum() == runs["budget_ms"].notna().sum()


@pytest.mark.slow
def test_every_table_of_every_page_shows_the_no_value_mark() -> None:
    for page in ("overview", "runs", "attribution", "cost", "failures", "utilisation",
                 "reconciliation", "weekly", "simulate", "budgets"):
        at = open_page(page)
        for table in at.dataframe:
            assert table.proto.placeholder == fmt.NO_VALUE, (page, table.key)


def test_run_view_steps_table_shows_on_call_columns_and_keeps_the_rest(db: str) -> None:
    runs = query(db, "runs")
    run_id = str(runs[runs["exhausted"].fillna(False).astype(bool)].iloc[0]["run_id"])
    at = open_page("run", {**PARAMS, "run": run_id})
    steps = at.dataframe[0]
    details = next(table for table in at.dataframe if "span id" in shown(table))
    assert shown(steps) == ["#", "step", "class", "role", "start", "duration", "share",
                            "allocated", "utilisation"]
    assert {"from", "effect status", "idempotency key", "attempt", "span id"} <= set(
        shown(details))
    pd.testing.assert_frame_equal(steps.value, details.value)


def test_run_lists_show_the_start_to_the_minute(db: str) -> None:
    runs = query(db, "runs")
    at = open_page("runs")
    table = at.dataframe[0].value
    by_id = runs.set_index("run_id")["start"]
    assert list(table["start"]) == [by_id[r][:16].replace("T", " ") for r in table["run_id"]]
    assert labels(at.dataframe[0])["start"] == "start (UTC)"
    # the columns left out of the first table are in the second, none lost
    assert set(shown(at.dataframe[0])) | set(shown(at.dataframe[1])) == set(table.columns)


def test_compare_tables_keep_every_column_one_click_away(db: str) -> None:
    runs = query(db, "runs")
    run_id = str(runs[runs["exhausted"].fillna(False).astype(bool)].iloc[0]["run_id"])
    at = open_page("compare", {**PARAMS, "run": run_id})
    by_key, steps = at.dataframe[1], at.dataframe[2]
    more_steps, key_durations = at.dataframe[3], at.dataframe[4]
    assert set(shown(steps)) | set(shown(more_steps)) == set(steps.value.columns)
    assert set(shown(by_key)) | set(shown(key_durations)) == set(by_key.value.columns)
    assert labels(steps)["duration difference"] == "Δ duration"
