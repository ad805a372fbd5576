"""The aggregate reports (docs/metrics.md §4-§7) on the hand-worked fleet of
tests/support/fleet.py."""

from __future__ import annotations

import math
from decimal import Decimal

import pandas as pd
import pytest

from queries import reports
from queries.filters import FilterError, Filters
from tests.support.fleet import build_fleet
from tests.support.trace_builder import open_db


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    con = open_db(tmp_path_factory.mktemp("fleet"))
    ids = build_fleet(con)
    yield con, ids
    con.close()


def records(frame: pd.DataFrame) -> list[dict]:
    out = []
    for row in frame.to_dict("records"):
        out.append({k: (None if v is None or v is pd.NA or (isinstance(v, float)
                                                            and math.isnan(v)) else v)
                    for k, v in row.items()})
    return out


def test_attribution_all_exhausted_runs(fleet):
    con, _ = fleet
    # Exhausted: A1 (B 10000), A3 (B 20000), B1 (B 10000) → Σ B = 40000.
    # gpt 2000 + 15000 = 17000 → 0.425; fetch 8000 + 5000 = 13000 → 0.325;
    # search 6000 → 0.15; report 0.
    assert records(reports.attribution(con)) == [
        {"step_key": "model:gpt", "budget_share": pytest.approx(0.425), "culprit_runs": 1,
         "holder_runs": 1, "exhausted_runs": 2},
        {"step_key": "tool:fetch", "budget_share": pytest.approx(0.325), "culprit_runs": 1,
         "holder_runs": 1, "exhausted_runs": 2},
        {"step_key": "tool:search", "budget_share": pytest.approx(0.15), "culprit_runs": 1,
         "holder_runs": 0, "exhausted_runs": 1},
        {"step_key": "tool:report", "budget_share": 0.0, "culprit_runs": 0,
         "holder_runs": 1, "exhausted_runs": 1},
    ]
    summary = records(reports.attribution_summary(con))[0]
    # A1 fetch/gpt, A3 gpt/fetch, B1 search/report: the culprit is never the holder.
    assert summary["exhausted_runs"] == 3
    assert summary["culprit_is_holder_rate"] == 0.0
    # unattributed: A1 0 + A3 0 + B1 4000 over Σ B 40000.
    assert summary["unattributed_share"] == pytest.approx(0.1)


def test_attribution_filtered_by_agent_and_dates(fleet):
    con, _ = fleet
    # alpha only: A1 + A3, Σ B 30000: gpt 17000/30000, fetch 13000/30000.
    alpha = records(reports.attribution(con, Filters(agent="alpha")))
    assert [(r["step_key"], r["budget_share"]) for r in alpha] == [
        ("model:gpt", pytest.approx(17 / 30)), ("tool:fetch", pytest.approx(13 / 30))]
    # --since 2026-11-23 drops B1 (2026-11-16); --until 10:00:00.001 keeps only A1 (until is
    # exclusive on the run start).
    window = Filters.parse("2026-11-23", "2026-11-23T10:00:00.001Z")
    only_a1 = records(reports.attribution(con, window))
    assert [(r["step_key"], r["budget_share"]) for r in only_a1] == [
        ("tool:fetch", pytest.approx(0.8)), ("model:gpt", pytest.approx(0.2))]
    # A2 starts exactly at 11:00: excluded by --until 11:00, included by --since 11:00.
    assert len(reports.runs(con, Filters.parse("2026-11-23T10:00:00Z",
                                               "2026-11-23T11:00:00Z"))) == 1
    assert len(reports.runs(con, Filters.parse("2026-11-23T11:00:00Z",
                                               "2026-11-23T12:00:00Z"))) == 1
    # An offset converts to UTC: 12:00+01:00 is 11:00Z.
    assert len(reports.runs(con, Filters.parse("2026-11-23T12:00:00+01:00",
                                               "2026-11-23T12:00:00Z"))) == 1


def test_runs_report(fleet):
    con, ids = fleet
    frame = reports.runs(con)
    assert list(frame.columns) == [
        "run_id", "agent", "start", "budget_ms", "elapsed_ms", "utilisation", "outcome",
        "exhausted", "culprit", "culprit_share", "holder", "unattributed_ms", "overrun_ms",
        "budget_source", "culprit_step", "holder_step", "root_missing",
        # docs/metrics.md §8: appended, every earlier column in its place
        "tokens", "cost_usd", "cost_complete"]
    rows = {r["run_id"]: r for r in records(frame)}
    assert [r["run_id"] for r in records(frame)] == [ids[n] for n in
                                                      ("B1", "A1", "A2", "A3", "N1")]
    assert rows[ids["A1"]] | {"run_id": "A1"} == {
        "run_id": "A1", "agent": "alpha", "start": "2026-11-23T10:00:00.000Z",
        "budget_ms": 10_000, "elapsed_ms": 12_000.0, "utilisation": pytest.approx(1.2),
        "outcome": None, "exhausted": True, "culprit": "tool:fetch",
        "culprit_share": pytest.approx(0.8), "holder": "model:gpt", "unattributed_ms": 0.0,
        "overrun_ms": 2_000.0, "budget_source": "span", "culprit_step": 1, "holder_step": 2,
        "root_missing": False,
        # no usage anywhere: $0 known, and incomplete, since model:gpt sent no usage and may
        # have been billed (§11.4)
        "tokens": 0, "cost_usd": Decimal("0"), "cost_complete": False}
    # tools only: nothing unmetered, so $0 is the whole cost
    assert (rows[ids["B1"]]["cost_usd"], rows[ids["B1"]]["cost_complete"]) == (0, True)
    assert rows[ids["B1"]]["agent"] == "beta-svc"
    assert rows[ids["N1"]]["budget_ms"] is None and rows[ids["N1"]]["exhausted"] is None
    assert rows[ids["N1"]]["budget_source"] is None
    # B1's holder is its last step started (a refusal at +6 s), not the culprit (#1 search)
    assert (rows[ids["B1"]]["culprit_step"], rows[ids["B1"]]["holder_step"]) == (1, 2)
    assert rows[ids["N1"]]["culprit_step"] is None


def test_failures_report(fleet):
    con, _ = fleet
    # fetch: A1 ok, A2 HTTP 503, A3 client_timeout (stated), N1 ReadTimeout → 4 steps.
    assert records(reports.failures(con)) == [
        {"step_key": "tool:fetch", "steps": 4, "ok": 1, "client_timeouts": 2,
         "upstream_errors": 1, "refused": 0, "cancelled": 0, "client_errors": 0, "errors": 0},
        {"step_key": "model:gpt", "steps": 3, "ok": 3, "client_timeouts": 0,
         "upstream_errors": 0, "refused": 0, "cancelled": 0, "client_errors": 0, "errors": 0},
        {"step_key": "tool:report", "steps": 1, "ok": 0, "client_timeouts": 0,
         "upstream_errors": 0, "refused": 1, "cancelled": 0, "client_errors": 0, "errors": 0},
        {"step_key": "tool:search", "steps": 1, "ok": 1, "client_timeouts": 0,
         "upstream_errors": 0, "refused": 0, "cancelled": 0, "client_errors": 0, "errors": 0},
    ]


def test_utilisation_report_and_histogram(fleet):
    con, _ = fleet
    # alpha budgeted runs sorted: 0.5 (A2), 1.0 (A3), 1.2 (A1); quantile_cont position
    # q * (n - 1): p50 → 1.0; p90 → 1.8 → 1.0 + 0.8 * 0.2 = 1.16; p95 → 1.18; p99 → 1.196.
    assert records(reports.utilisation(con)) == [
        {"agent": "alpha", "runs": 3, "p50": pytest.approx(1.0), "p90": pytest.approx(1.16),
         "p95": pytest.approx(1.18), "p99": pytest.approx(1.196), "max": pytest.approx(1.2)},
        {"agent": "beta-svc", "runs": 1, "p50": 1.0, "p90": 1.0, "p95": 1.0, "p99": 1.0,
         "max": 1.0},
    ]
    histogram = records(reports.utilisation_histogram(con, Filters(agent="alpha"),
                                                      bin_width=0.5))
    assert [(r["bin_start"], r["runs"]) for r in histogram] == [(0.5, 1), (1.0, 2)]


def test_weekly_report(fleet):
    con, _ = fleet
    frame = reports.weekly(con)
    assert list(frame.columns) == [
        "week", "agent", "runs", "budgeted_runs", "exhausted_runs", "exhaustion_rate",
        "utilisation_p50",
        "utilisation_p90", "utilisation_p99", "steps", "client_timeouts", "upstream_errors",
        "refused", "write_steps", "reconciled_writes", "reconciliation_rate", "orphan_writes",
        "top_culprit", "top_culprit_share", "partial_week",
        # docs/metrics.md §7, §11.9: appended after partial_week
        "tokens", "cost_usd", "incomplete_cost_runs", "unpriced_steps",
        "unmetered_billable_steps", "usd_budgeted_runs", "usd_exhausted_runs",
        "usd_exhaustion_rate", "cost_utilisation_p50", "cost_utilisation_p90",
        "cost_utilisation_p99", "overrun_usd", "top_cost_culprit", "top_cost_culprit_share",
        "token_budgeted_runs", "token_exhausted_runs", "token_utilisation_p90",
        "weekly_budget_usd", "weekly_budget_utilisation"]
    no_costs = {"tokens": 0, "cost_usd": Decimal("0"), "unpriced_steps": 0,
                "usd_budgeted_runs": 0, "usd_exhausted_runs": 0, "usd_exhaustion_rate": None,
                "cost_utilisation_p50": None, "cost_utilisation_p90": None,
                "cost_utilisation_p99": None, "overrun_usd": None, "top_cost_culprit": None,
                "top_cost_culprit_share": None, "token_budgeted_runs": 0,
                "token_exhausted_runs": 0, "token_utilisation_p90": None,
                "weekly_budget_usd": None, "weekly_budget_utilisation": None}
    assert records(frame) == [
        {"week": "2026-W47", "agent": "beta-svc", "runs": 1, "budgeted_runs": 1,
         "exhausted_runs": 1,
         "exhaustion_rate": 1.0, "utilisation_p50": 1.0, "utilisation_p90": 1.0,
         "utilisation_p99": 1.0, "steps": 2, "client_timeouts": 0, "upstream_errors": 0,
         "refused": 1, "write_steps": 0, "reconciled_writes": 0, "reconciliation_rate": None,
         "orphan_writes": 0, "top_culprit": "tool:search", "top_culprit_share": 0.6,
         "partial_week": False, **no_costs, "incomplete_cost_runs": 0,
         "unmetered_billable_steps": 0},
        # 4 runs (N1 has no budget), exhausted 2 of the 3 budgeted; 7 steps; top culprit gpt
        # with 17000 of the exhausted runs' 30000 ms.
        {"week": "2026-W48", "agent": "alpha", "runs": 4, "budgeted_runs": 3,
         "exhausted_runs": 2,
         "exhaustion_rate": pytest.approx(2 / 3), "utilisation_p50": pytest.approx(1.0),
         "utilisation_p90": pytest.approx(1.16), "utilisation_p99": pytest.approx(1.196),
         "steps": 7, "client_timeouts": 2, "upstream_errors": 1, "refused": 0,
         "write_steps": 0, "reconciled_writes": 0, "reconciliation_rate": None,
         "orphan_writes": 0, "top_culprit": "model:gpt",
         "top_culprit_share": pytest.approx(17 / 30), "partial_week": False, **no_costs,
         # A1, A2 and A3 have a model:gpt step that sent no usage (possibly billed)
         "incomplete_cost_runs": 3, "unmetered_billable_steps": 3},
    ]


def test_partial_weeks_are_marked(fleet):
    """docs/metrics.md §7 partial_week: a rolling range labelled a cut week as a whole one."""
    import datetime as dt
    con, _ = fleet
    utc = dt.UTC
    # 2026-W48 is Monday 2026-11-23 .. Monday 2026-11-30.
    def partial(filters, now=dt.datetime(2026, 12, 7, tzinfo=utc)):
        frame = reports.weekly(con, filters, now=now)
        return dict(zip(frame["week"], frame["partial_week"], strict=True))
    assert partial(Filters()) == {"2026-W47": False, "2026-W48": False}
    assert partial(Filters.parse("2026-11-23", "2026-11-30")) == {"2026-W48": False}
    # a range starting after Monday, or ending before the next Monday, cuts the week
    assert partial(Filters.parse("2026-11-23T06:00:00Z", None))["2026-W48"] is True
    assert partial(Filters.parse(None, "2026-11-29"))["2026-W48"] is True
    # the present inside the week cuts it too; once the week is over it is whole again
    assert partial(Filters(), now=dt.datetime(2026, 11, 27, tzinfo=utc))["2026-W48"] is True
    assert partial(Filters(), now=dt.datetime(2026, 11, 30, tzinfo=utc))["2026-W48"] is False


def test_step_utilisation(tmp_path):
    from tests.support.trace_builder import TraceBuilder, store
    b = TraceBuilder()
    run = b.run(0, 10_000, 10_000)
    b.step(run, "tool", "a", 0, 1_000, **{"budget.allocated_ms": 2_000})   # 0.5
    b.step(run, "tool", "b", 1_000, 4_000, **{"budget.allocated_ms": 2_000})   # 1.5
    b.step(run, "tool", "c", 4_000, 5_000)   # no allocation: left out
    # backoff sleeps, whatever they wait for, are one row
    b.step(run, "backoff", "a", 5_000, 5_500, **{"budget.allocated_ms": 500})   # 1.0
    b.step(run, "backoff", "b", 5_500, 5_900, **{"budget.allocated_ms": 500})   # 0.8
    con = open_db(tmp_path)
    store(con, b.finished())
    frame = records(reports.step_utilisation(con))
    assert [(r["step_key"], r["steps"], r["max"]) for r in frame] == [
        ("backoff:*", 2, 1.0), ("tool:a", 1, 0.5), ("tool:b", 1, 1.5)]


@pytest.mark.parametrize("since,until,message", [
    ("yesterday", None, "--since: 'yesterday' is not an ISO date"),
    ("2026-02-30", None, "--since: '2026-02-30' is not an ISO date"),
    (None, "2026-11-23T25:00", "--until"),
    ("2026-11-24", "2026-11-23", "is not before --until"),
])
def test_bad_filters(since, until, message):
    with pytest.raises(FilterError, match=message.replace("(", r"\(")):
        Filters.parse(since, until)
