"""queries.run_compare: which run is typical, and two runs' steps side by side (pure functions
over the runs report and load_run's steps), plus the comparison page under AppTest on the
bundled sample: its numbers are the functions' numbers for the same runs."""

from __future__ import annotations

import pandas as pd
import pytest

from dashboard import fmt
from queries import reports, run_compare
from queries.run_view import load_run
from store import connect
from tests.support.apptest import FILTERS, PARAMS, charts, open_page


def _runs(rows: list[tuple[str, str, str, float | None, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["run_id", "agent", "outcome", "utilisation", "start"])


def test_typical_run_is_the_lower_median_completed_run_of_the_agent() -> None:
    runs = _runs([
        ("a1", "a", "completed", 0.9, "2026-11-20T00:00:01Z"),
        ("a2", "a", "completed", 0.2, "2026-11-20T00:00:02Z"),
        ("a3", "a", "completed", 0.5, "2026-11-20T00:00:03Z"),
        ("a4", "a", "completed", 0.7, "2026-11-20T00:00:04Z"),
        ("a5", "a", "exhausted", 0.6, "2026-11-20T00:00:05Z"),  # not healthy
        ("a6", "a", "completed", None, "2026-11-20T00:00:06Z"),  # no budget
        ("b1", "b", "completed", 0.6, "2026-11-20T00:00:07Z"),  # another agent
        ("x", "a", "failed", 1.2, "2026-11-20T00:00:08Z"),
    ])
    choice = run_compare.typical_run(runs, "a", "x")
    # 0.2, 0.5, 0.7, 0.9: the lower middle one is 0.5 (a real run, not 0.6)
    assert (choice.run_id, choice.candidates, choice.median_utilisation) == ("a3", 4, 0.5)
    # never the run under review: without a3 the middle of 0.2, 0.7, 0.9 is 0.7
    assert run_compare.typical_run(runs, "a", "a3").run_id == "a4"


def test_no_typical_run_says_why() -> None:
    runs = _runs([("a1", "a", "exhausted", 1.0, "2026-11-20T00:00:01Z")])
    choice = run_compare.typical_run(runs, "a", "a1")
    assert choice.run_id is None and choice.candidates == 0
    assert "no other completed run of agent a" in choice.reason


def test_the_typical_run_is_looked_for_around_the_runs_own_time() -> None:
    """Not in the page's range: the week around the run's start, else the month, else all."""
    import datetime as dt

    from queries.filters import Filters

    day = 86_400 * 10**9
    start = int(dt.datetime(2026, 11, 20, tzinfo=dt.UTC).timestamp()) * 10**9
    runs = _runs([("near", "a", "completed", 0.4, "2026-11-21T00:00:00Z"),
                  ("far", "a", "completed", 0.5, "2026-11-01T00:00:00Z"),
                  ("x", "a", "exhausted", 1.0, "2026-11-20T00:00:00Z")])
    asked: list[Filters] = []

    def runs_of(filters: Filters) -> pd.DataFrame:
        asked.append(filters)
        starts = pd.to_datetime(runs["start"], utc=True)
        keep = pd.Series(True, index=runs.index)
        if filters.since is not None:
            keep &= (starts >= filters.since) & (starts < filters.until)
        return runs[keep]

    choice, among = run_compare.typical_around(start, "a", "x", runs_of)
    assert choice.run_id == "near" and choice.candidates == 1
    assert choice.window == ("the week around this run's start (2026-11-16 12:00 → "
                             "2026-11-23 12:00 UTC)")
    assert choice.reason == "the median-utilisation completed run of 1 completed run"
    assert (asked[0].agent, asked[0].until - asked[0].since) == ("a", dt.timedelta(days=7))
    # with nothing in its week, the month around it
    choice, _ = run_compare.typical_around(start - 4 * day, "a", "x", runs_of)
    assert choice.window.startswith("the month around") and choice.run_id in ("near", "far")
    choice, _ = run_compare.typical_around(start + 40 * day, "a", "x", runs_of)
    assert choice.window == "all time" and choice.candidates == 2


def _steps(rows: list[tuple[str, int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"span_id": f"{key}{start}", "step_key": key, "step_class": "ok",
                          "start_ns": start, "offset_ms": start / 1e6, "duration_ms": duration,
                          "consumption_ms": consumed} for key, start, duration, consumed in rows])


def test_steps_match_by_key_and_occurrence() -> None:
    run = _steps([("model", 10, 100.0, 100.0), ("tool", 20, 50.0, 40.0),
                  ("model", 30, 300.0, 300.0), ("backoff", 40, 5.0, 5.0)])
    other = _steps([("tool", 5, 20.0, 20.0), ("model", 15, 120.0, 120.0),
                    ("model", 25, 80.0, 80.0), ("model", 35, 60.0, 60.0)])
    aligned = run_compare.align_steps(run, other)
    rows = {(r.step_key, r.occurrence): r for r in aligned.itertuples()}
    assert set(rows) == {("model", 1), ("model", 2), ("model", 3), ("tool", 1), ("backoff", 1)}
    assert rows[("model", 2)].duration_ms_run == 300.0
    assert rows[("model", 2)].duration_ms_other == 80.0
    assert rows[("model", 2)].duration_ms_diff == 220.0
    assert rows[("tool", 1)].consumption_ms_diff == 20.0
    assert rows[("backoff", 1)].present == run_compare.ONLY_RUN
    assert rows[("model", 3)].present == run_compare.ONLY_OTHER
    # the run's order first, the other run's unmatched steps after it
    assert list(aligned["step_key"]) == ["model", "tool", "model", "backoff", "model"]

    by_key = run_compare.compare_by_key(aligned).set_index("step_key")
    assert by_key.loc["model", ["steps_run", "steps_other"]].tolist() == [2, 3]
    assert by_key.loc["model", "consumption_ms_run"] == 400.0
    assert by_key.loc["model", "consumption_ms_other"] == 260.0
    assert by_key.loc["model", "consumption_ms_diff"] == 140.0
    assert by_key.loc["backoff", "present"] == run_compare.ONLY_RUN
    assert by_key.loc["backoff", "consumption_ms_diff"] == 5.0
    assert list(by_key.index) == ["model", "tool", "backoff"]  # largest difference first


# ---- the page --------------------------------------------------------------------------

@pytest.fixture()
def db(sample: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BUDGETSCOPE_DB", sample)
    return sample


def _exhausted_and_typical(db: str) -> tuple[str, str, pd.DataFrame, pd.DataFrame]:
    con = connect(db, read_only=True)
    try:
        runs = reports.runs(con, FILTERS)
        run = runs[runs["exhausted"].fillna(False).astype(bool)].iloc[0]
        typical, _ = run_compare.typical_around(
            int(pd.Timestamp(run["start"]).value), run["agent"], run["run_id"],
            lambda filters: reports.runs(con, filters))
        assert typical.run_id
        aligned = run_compare.align_steps(load_run(con, run["run_id"]).steps,
                                          load_run(con, typical.run_id).steps)
    finally:
        con.close()
    return str(run["run_id"]), typical.run_id, aligned, run_compare.compare_by_key(aligned)


def test_compare_page_shows_the_typical_run_and_the_queries_numbers(db: str) -> None:
    run_id, typical_id, aligned, by_key = _exhausted_and_typical(db)
    at = open_page("compare", {**PARAMS, "run": run_id})
    assert at.selectbox(key="compare_with").value == typical_id
    shown_keys = at.dataframe[1].value
    assert list(shown_keys["step key"]) == list(by_key["step_key"])
    assert list(shown_keys["consumption difference"]) == [
        ("+" if v > 0 else "") + fmt.duration(v) for v in by_key["consumption_ms_diff"]]
    assert list(shown_keys["steps (typical run)"]) == [fmt.count(v) for v in by_key["steps_other"]]
    steps = at.dataframe[2].value
    assert len(steps) == len(aligned)
    assert list(steps["in"]) == list(aligned["present"])
    figure = charts(at)["Consumption per step key"]
    bars = {t["name"]: t for t in figure["data"]}
    assert set(bars) == {"this run", "typical run"}
    assert "step key %{customdata[0]}" in bars["this run"]["hovertemplate"]
    # the URL says the run; without `with` the comparison is with the typical run
    assert at.query_params["run"] in (run_id, [run_id])


@pytest.mark.slow
def test_compare_page_with_a_chosen_run_by_deep_link(db: str) -> None:
    run_id, typical_id, _, _ = _exhausted_and_typical(db)
    con = connect(db, read_only=True)
    try:
        runs = reports.runs(con, FILTERS)
    finally:
        con.close()
    agent = runs.set_index("run_id").loc[run_id, "agent"]
    chosen = next(r for r in runs[runs["agent"] == agent]["run_id"]
                  if r not in (run_id, typical_id))
    at = open_page("compare", {**PARAMS, "run": run_id, "with": chosen})
    assert at.selectbox(key="compare_with").value == chosen
    assert any("chosen run" in c for c in at.dataframe[0].value.columns)
    # picking the typical run again drops `with` from the URL
    at.selectbox(key="compare_with").select(typical_id).run()
    assert "with" not in at.query_params
    assert at.selectbox(key="compare_with").value == typical_id


def test_run_view_links_to_the_comparison(db: str) -> None:
    run_id, _, _, _ = _exhausted_and_typical(db)
    at = open_page("run", {**PARAMS, "run": run_id})
    links = [str(link.proto) for link in at.get("page_link")]
    assert any("compare" in link and run_id in link for link in links), links
