"""The views the dashboard needs beyond the CLI reports: what the database holds, failures per
day, tool latency against caps, budget share of runs that survived, and the orphan writes."""

from __future__ import annotations

import pytest

from queries import reports
from queries.filters import Filters
from tests.support.trace_builder import TraceBuilder, open_db, store

WRITE = {"budget.side_effect": "write"}


@pytest.fixture
def con(tmp_path):
    connection = open_db(tmp_path)
    b = TraceBuilder()
    # Run A (B = 10 s) died: a 4 s tool call, then a model call until the deadline.
    a = b.run(0, 10_000, 10_000, budget_run_outcome="exhausted")
    b.step(a, "tool", "fetch", 0, 4_000, **{"budget.cap_ms": 5_000})
    b.step(a, "model", "m", 4_000, 10_000)
    # Run B (B = 10 s) completed: fetch 2 s, model 1 s, two writes of 0.5 s (k1 never read
    # back although its effect is possible: an orphan; k2 read back), one reconcile of 0.2 s.
    r = b.run(20_000, 24_200, 10_000, budget_run_outcome="completed")
    b.step(r, "tool", "fetch", 20_000, 22_000, **{"budget.cap_ms": 5_000})
    b.step(r, "model", "m", 22_000, 23_000)
    b.step(r, "tool", "w", 23_000, 23_500, **WRITE, **{"budget.effect_status": "possible",
                                                      "budget.idempotency_key": "k1"})
    b.step(r, "tool", "w2", 23_500, 24_000, **WRITE, **{"budget.effect_status": "possible",
                                                       "budget.idempotency_key": "k2"})
    b.step(r, "reconcile", "check", 24_000, 24_200, **{"budget.idempotency_key": "k2",
                                                       "budget.reconcile.result": "landed"})
    store(connection, b.finished())
    yield connection
    connection.close()


def test_database_status_counts_what_is_stored(con):
    row = reports.database_status(con).iloc[0]
    assert (row["spans"], row["runs"], row["traces_pending_derivation"]) == (9, 2, 0)
    assert row["newest_received"] is not None


def test_failures_daily_has_one_column_per_class(con):
    daily = reports.failures_daily(con, Filters())
    # Both runs start on Monday 2026-11-23 (UTC); 2 + 5 steps, all ok.
    assert daily.to_dict("records") == [{
        "day": "2026-11-23", "steps": 7, "ok": 7, "client_timeout": 0, "upstream_error": 0,
        "refused": 0, "cancelled": 0, "client_error": 0, "error": 0}]


def test_tool_latency_lists_every_tool_call_with_its_cap(con):
    calls = reports.tool_latency(con, Filters())
    caps = [None if cap is None or cap != cap else int(cap)  # NULL arrives as NA
            for cap in calls["cap_ms"].astype(object).where(calls["cap_ms"].notna(), None)]
    assert sorted(zip(calls["step_key"], calls["duration_ms"].round(3), caps, strict=True),
                  key=str) == sorted([
        ("tool:fetch", 2_000.0, 5_000), ("tool:fetch", 4_000.0, 5_000),
        ("tool:w", 500.0, None), ("tool:w2", 500.0, None)], key=str)


def test_attribution_of_runs_that_survived(con):
    shares = reports.attribution_completed(con, Filters())
    # Only run B: Σ B = 10 000 ms; fetch 2 000 → 0.2, m 1 000 → 0.1, w and w2 500 → 0.05,
    # check 200 → 0.02.
    assert dict(zip(shares["step_key"], shares["budget_share"].round(6), strict=True)) == {
        "tool:fetch": 0.2, "model:m": 0.1, "tool:w": 0.05, "tool:w2": 0.05,
        "reconcile:check": 0.02}


def test_orphan_writes_name_run_tool_and_key(con):
    orphans = reports.orphan_writes(con, Filters())
    assert orphans[["step_key", "idempotency_key", "start"]].to_dict("records") == [
        {"step_key": "tool:w", "idempotency_key": "k1", "start": "2026-11-23T10:00:23.000Z"}]
    assert orphans["run_id"].iloc[0] == reports.runs(con, Filters())["run_id"].iloc[1]
