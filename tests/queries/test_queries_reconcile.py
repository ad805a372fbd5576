"""docs/metrics.md §6: write steps, uncertain writes, reconciliation by key and by span link,
orphans."""

from __future__ import annotations

import pytest

from queries import reports
from queries.run_view import load_run
from tests.support.trace_builder import TraceBuilder, open_db, store

WRITE = {"budget.side_effect": "write"}


def _writes(con):
    rows = con.execute("SELECT span_name, is_uncertain, reconciled, orphan, reconciliations, "
                       "last_result FROM write_steps").fetchall()
    return {row[0]: row[1:] for row in rows}


@pytest.fixture
def con(tmp_path):
    connection = open_db(tmp_path)
    yield connection
    connection.close()


def test_reconciliation_by_key_and_link_and_orphans(con):
    b = TraceBuilder()
    run = b.run(0, 20_000, 20_000)
    # w1 timed out (uncertain by class); read back twice by key: the later result counts.
    b.step(run, "tool", "w1", 0, 1_000, **WRITE, **{"budget.idempotency_key": "k1",
                                                    "budget.outcome": "client_timeout"})
    b.step(run, "reconcile", "r1a", 2_000, 2_100, **{"budget.idempotency_key": "k1",
                                                     "budget.reconcile.result": "unknown"})
    b.step(run, "reconcile", "r1b", 3_000, 3_100, **{"budget.idempotency_key": "k1",
                                                     "budget.reconcile.result": "landed"})
    # w2 says its effect is possible; read back by a span link, no key on the reconcile step.
    w2 = b.step(run, "tool", "w2", 4_000, 5_000, **WRITE,
                **{"budget.effect_status": "possible", "budget.idempotency_key": "k2"})
    b.span("reconcile r2", 6_000, 6_100, parent=run, links=[w2], attributes={
        "budget.step.kind": "reconcile", "budget.step.name": "r2",
        "budget.reconcile.result": "not_landed"})
    # w3 cancelled, nobody read it back: an orphan.
    b.step(run, "tool", "w3", 7_000, 8_000, **WRITE, **{"budget.idempotency_key": "k3",
                                                        "budget.outcome": "cancelled"})
    # w4 succeeded: a write, certain, not reconciled, not an orphan.
    b.step(run, "tool", "w4", 8_000, 9_000, **WRITE, **{"budget.idempotency_key": "k4"})
    # w5 timed out but its effect is known to be completed: effect_status decides → certain.
    b.step(run, "tool", "w5", 9_000, 10_000, **WRITE, **{
        "budget.effect_status": "completed", "budget.outcome": "client_timeout"})
    # A reconcile step without a result reads back w3's key in ANOTHER run: does not count.
    other = b.run(0, 1_000, 1_000)
    b.step(other, "reconcile", "elsewhere", 100, 200, **{"budget.idempotency_key": "k3"})
    # A read is not a write.
    b.step(run, "tool", "read", 10_000, 11_000, **{"budget.side_effect": "read",
                                                   "budget.outcome": "client_timeout"})
    store(con, b.finished())
    assert _writes(con) == {
        "tool w1": (True, True, False, 2, "landed"),
        "tool w2": (True, True, False, 1, "not_landed"),
        "tool w3": (True, False, True, 0, None),
        "tool w4": (False, False, False, 0, None),
        "tool w5": (False, False, False, 0, None),
    }
    # The on-call view's per-run query applies the same rules as the write_steps view.
    view = load_run(con, b.trace_id(run)).writes
    assert {(r.step_key, r.is_uncertain, r.reconciled, r.orphan, r.reconciliations)
            for r in view.itertuples()} == {
        ("tool:" + name.split()[1], *flags[:4]) for name, flags in _writes(con).items()}
    table = reports.reconciliation(con).set_index("step_key")
    # w1..w5 each have their own key; per key: write_steps 1 each.
    assert table.loc["tool:w1"].to_dict() == {
        "write_steps": 1, "uncertain_writes": 1, "reconciled_writes": 1, "orphan_writes": 0,
        "reconciliation_rate": 1.0, "landed": 1, "not_landed": 0, "unknown": 0}
    assert table.loc["tool:w3", "orphan_writes"] == 1
    assert table.loc["tool:w3", "reconciliation_rate"] == 0.0
    assert "tool:read" not in table.index
    # The weekly report reads the same rules its own way (a reconcile key or link per write,
    # not every reconciliation), and its step counts from the runs' own: both as stored.
    weekly = reports.weekly(con)
    assert weekly[["write_steps", "reconciled_writes", "orphan_writes"]].sum().to_dict() == {
        "write_steps": 5, "reconciled_writes": 2, "orphan_writes": 1}
    assert weekly[["steps", "client_timeouts", "upstream_errors", "refused"]].sum().to_dict() \
        == dict(zip(("steps", "client_timeouts", "upstream_errors", "refused"), con.execute(
            "SELECT count(*), count(*) FILTER (WHERE class = 'client_timeout'), "
            "count(*) FILTER (WHERE class = 'upstream_error'), "
            "count(*) FILTER (WHERE class = 'refused') FROM steps").fetchone(), strict=True))


def test_reconcile_link_across_traces_in_either_order(tmp_path):
    b = TraceBuilder()
    run = b.run(0, 5_000, 5_000)
    write = b.step(run, "tool", "pay", 0, 5_000, **WRITE, **{"budget.outcome": "client_timeout"})
    retry_run = b.run(10_000, 12_000, 5_000)   # a later run (another trace) reads it back
    b.span("reconcile pay", 10_000, 10_500, parent=retry_run, links=[write], attributes={
        "budget.step.kind": "reconcile", "budget.step.name": "pay",
        "budget.reconcile.result": "landed"})
    spans = b.finished()
    first = [s for s in spans if s.context.trace_id == run.get_span_context().trace_id]
    second = [s for s in spans if s not in first]
    for name, order in (("forward", [first, second]), ("backward", [second, first])):
        con = open_db(tmp_path, f"{name}.duckdb")
        for part in order:
            store(con, part)
        assert _writes(con) == {"tool pay": (True, True, False, 1, "landed")}, name
        weekly = reports.weekly(con)
        assert weekly[["write_steps", "reconciled_writes", "orphan_writes"]].sum().to_dict() \
            == {"write_steps": 1, "reconciled_writes": 1, "orphan_writes": 0}, name
        con.close()


def test_reconciliation_by_period(con):
    b = TraceBuilder()
    for week in range(2):
        run = b.span("agent run", 0, 1_000, attributes={"budget.total_ms": 1_000},
                     t0_ns=1_795_428_000 * 10**9 - week * 7 * 86_400 * 10**9)
        b.step(run, "tool", "save", 0, 500, **WRITE, **{"budget.outcome": "client_timeout",
                                                         "budget.idempotency_key": f"k{week}"})
        if week == 0:
            b.step(run, "reconcile", "save", 600, 700, **{"budget.idempotency_key": "k0"})
    store(con, b.finished())
    frame = reports.reconciliation_by_period(con)
    assert frame.to_dict("records") == [
        {"week": "2026-W47", "day": "2026-11-16", "step_key": "tool:save", "write_steps": 1,
         "reconciled_writes": 0, "orphan_writes": 1, "reconciliation_rate": 0.0},
        {"week": "2026-W48", "day": "2026-11-23", "step_key": "tool:save", "write_steps": 1,
         "reconciled_writes": 1, "orphan_writes": 0, "reconciliation_rate": 1.0},
    ]
