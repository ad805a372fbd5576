"""One run's spend as its bill grew (queries/run_spend.py) against the derivation's own
columns, on every run of the bundled sample with a dollar budget: the walk finds the same
crossing call (its top-level step is the run's cost_crosser_span_id, the spend before and after
it the run's), adds up to the run's cost, and never reaches a budget the run stayed within.
Also the unpriced call: kept, adding nothing known (docs/metrics.md §11.3, §11.6)."""

from __future__ import annotations

import pandas as pd

from queries.run_spend import run_spend, spend_of
from store import connect


def test_the_walk_is_the_derivations_crosser_on_every_budgeted_run(sample: str) -> None:
    con = connect(sample, read_only=True)
    try:
        runs = con.execute(
            "SELECT run_id, usd_budget_nano, cost_nano, cost_crosser_span_id, "
            "cost_before_crossing_nano, cost_after_crossing_nano FROM runs "
            "WHERE usd_budget_nano IS NOT NULL ORDER BY run_id").df()
        crossed = 0
        for run in runs.to_dict("records"):
            spend = run_spend(con, run)
            calls = spend.calls
            assert int(calls["cumulative_nano"].iloc[-1] if len(calls) else 0) == run["cost_nano"]
            if pd.isna(run["cost_after_crossing_nano"]):
                assert spend.crossing is None, run["run_id"]
                continue
            crossed += 1
            i = spend.crossing
            assert i is not None, run["run_id"]
            assert calls["cumulative_nano"].iloc[i] == run["cost_after_crossing_nano"]
            before = calls["cumulative_nano"].iloc[i - 1] if i else 0
            assert before == run["cost_before_crossing_nano"]
            if not pd.isna(run["cost_crosser_span_id"]):
                assert calls["top_step_id"].iloc[i] == run["cost_crosser_span_id"]
        assert crossed >= 20  # the sample's dollar-exhausted runs that reached their budget
    finally:
        con.close()


def test_an_unpriced_call_adds_nothing_known_and_a_budget_of_zero_is_reached_at_once() -> None:
    calls = pd.DataFrame({
        "span_id": ["a", "b", "c"], "top_step_id": ["s1", "s2", None],
        "start_ns": [0, 1, 2], "end_ns": [5, 6, 7], "model": ["m", "secret", "m"],
        "tokens": [10, 20, 30], "cost_nano": pd.array([100, None, 50], dtype="Int64"),
        "cost_source": ["bundled", "unpriced", "reported"]})
    spend = spend_of(calls, 120)
    assert list(spend.calls["cumulative_nano"]) == [100, 100, 150]
    assert spend.crossing == 2 and spend.unpriced_calls == 1
    assert spend_of(calls, 0).crossing == 0
    assert spend_of(calls, 151).crossing is None
    assert spend_of(calls, None).crossing is None
    assert spend_of(calls.iloc[:0], 10).crossing is None
