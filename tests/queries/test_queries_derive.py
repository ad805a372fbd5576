"""Per-run derivation (docs/metrics.md §1, §4, §5): hand-worked runs, each with its arithmetic
written out.

Times are ms after T0 (see trace_builder). A run's window is [s, e] with e = min(run end, d).
"""

from __future__ import annotations

import random

import pytest

from queries.run_view import load_run
from store.testing import rebuild_all
from tests.support.trace_builder import MS, T0_NS, TraceBuilder, open_db, run_row, step_rows, store


@pytest.fixture
def con(tmp_path):
    connection = open_db(tmp_path)
    yield connection
    connection.close()


def test_sequential_steps_with_gaps(con):
    b = TraceBuilder()
    run = b.run(0, 9_000, 10_000)
    b.step(run, "tool", "search", 1_000, 3_000)   # 2000 ms alone
    b.step(run, "model", "gpt", 4_000, 8_000)     # 4000 ms alone
    store(con, b.finished())
    rid = b.trace_id(run)
    r = run_row(con, rid)
    # d = s + B = 10000 > run end 9000, so e = 9000; window 9000 ms.
    # unattributed = [0,1000) + [3000,4000) + [8000,9000) = 3000; 2000 + 4000 + 3000 = 9000.
    assert r["unattributed_ms"] == pytest.approx(3_000)
    steps = step_rows(con, rid)
    assert steps["tool search"]["consumption_ms"] == pytest.approx(2_000)
    assert steps["model gpt"]["consumption_ms"] == pytest.approx(4_000)
    # culprit: gpt (4000 > 2000); share 4000 / 10000.
    assert r["culprit_key"] == "model:gpt"
    assert r["culprit_share"] == pytest.approx(0.4)
    # holder: nothing active at d = 10000 (run over at 9000): last step to start before the
    # run ended = gpt.
    assert r["holder_key"] == "model:gpt"
    # utilisation = 9000 / 10000; latest end 9000 < d: not exhausted, no overrun.
    assert r["elapsed_ms"] == pytest.approx(9_000)
    assert r["utilisation"] == pytest.approx(0.9)
    assert r["exhausted"] is False
    assert r["overrun_ms"] == pytest.approx(0)
    assert r["top_level_steps"] == 2 and r["steps"] == 2
    assert r["week"] == "2026-W48"
    assert rid == r["run_id"] and len(rid) == 32


def test_parallel_branches_share_wall_clock(con):
    b = TraceBuilder()
    run = b.run(0, 10_000, 12_000)
    b.step(run, "tool", "a", 0, 6_000)
    b.step(run, "tool", "b", 2_000, 8_000)
    b.step(run, "tool", "c", 4_000, 6_000)
    store(con, b.finished())
    steps = step_rows(con, b.trace_id(run))
    # Elementary intervals in [0, 10000]:
    #   [0,2000)   a          → a 2000
    #   [2000,4000) a b       → a 1000, b 1000
    #   [4000,6000) a b c     → 2000/3 each
    #   [6000,8000) b         → b 2000
    #   [8000,10000) none     → unattributed 2000
    third = 2_000 / 3
    assert steps["tool a"]["consumption_ms"] == pytest.approx(3_000 + third)
    assert steps["tool b"]["consumption_ms"] == pytest.approx(3_000 + third)
    assert steps["tool c"]["consumption_ms"] == pytest.approx(third)
    r = run_row(con, b.trace_id(run))
    assert r["unattributed_ms"] == pytest.approx(2_000)
    # a and b tie at 3666.67 ms: the earlier start (a) is the culprit.
    assert r["culprit_key"] == "tool:a"
    assert r["culprit_share"] == pytest.approx((3_000 + third) / 12_000)
    total = sum(s["consumption_ms"] for s in steps.values()) + r["unattributed_ms"]
    assert total == pytest.approx(10_000)


def test_window_clipped_at_deadline_overrun_and_holder(con):
    b = TraceBuilder()
    run = b.run(0, 13_000, 10_000)
    b.step(run, "tool", "fetch", 500, 6_500)        # the big early spender
    b.step(run, "model", "plan", 7_000, 9_000)
    b.step(run, "tool", "post", 9_000, 12_500)      # running when the deadline fires
    store(con, b.finished())
    rid = b.trace_id(run)
    r = run_row(con, rid)
    steps = step_rows(con, rid)
    # d = 10000, e = min(13000, 10000) = 10000. post is clipped to [9000, 10000] → 1000.
    assert steps["tool fetch"]["consumption_ms"] == pytest.approx(6_000)
    assert steps["model plan"]["consumption_ms"] == pytest.approx(2_000)
    assert steps["tool post"]["consumption_ms"] == pytest.approx(1_000)
    # unattributed: [0,500) + [6500,7000) = 1000; 6000 + 2000 + 1000 + 1000 = 10000 = e - s.
    assert r["unattributed_ms"] == pytest.approx(1_000)
    assert r["culprit_key"] == "tool:fetch" and r["culprit_share"] == pytest.approx(0.6)
    # post is active at d (9000 < 10000 <= 12500): it holds the deadline, fetch spent it.
    assert r["holder_key"] == "tool:post"
    assert r["culprit_span_id"] != r["holder_span_id"]
    # overrun = latest end 13000 - d 10000; utilisation = 13000 / 10000.
    assert r["overrun_ms"] == pytest.approx(3_000)
    assert r["utilisation"] == pytest.approx(1.3)
    assert r["exhausted"] is True  # no outcome stated: latest end >= d


def test_holder_at_deadline_latest_started_wins(con):
    b = TraceBuilder()
    run = b.run(0, 10_000, 10_000)
    b.step(run, "tool", "long", 1_000, 10_000)   # active at d = 10000 (ends exactly at d)
    b.step(run, "tool", "late", 8_000, 10_000)   # also active at d, started later → holder
    b.step(run, "model", "landing", 10_000, 10_000)  # starts at d: not active at d
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    assert r["holder_key"] == "tool:late"
    # long: [1000,8000) alone 7000 + [8000,10000) shared 1000 = 8000; late 1000.
    steps = step_rows(con, b.trace_id(run))
    assert steps["tool long"]["consumption_ms"] == pytest.approx(8_000)
    assert steps["tool late"]["consumption_ms"] == pytest.approx(1_000)
    assert steps["model landing"]["consumption_ms"] == pytest.approx(0)


def test_nested_steps_and_subagent_roll_up(con):
    b = TraceBuilder()
    run = b.run(0, 10_000, 20_000)
    tool = b.step(run, "tool", "fetch", 1_000, 5_000)
    b.step(tool, "other", "http-attempt-1", 1_000, 2_000, **{"budget.attempt": 1})
    b.step(tool, "other", "http-attempt-2", 2_500, 5_000, **{"budget.attempt": 2})
    plain = b.span("plain child", 6_000, 9_000, parent=run)     # not a step: no step attrs
    agent = b.span("invoke_agent researcher", 6_000, 9_000, parent=plain, attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"})
    b.span("chat inner", 6_500, 8_500, parent=agent, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x"})
    store(con, b.finished())
    rid = b.trace_id(run)
    steps = step_rows(con, rid)
    # fetch and the subagent are top-level (the plain child is not a step, so the subagent
    # has no step ancestor); the attempts and the inner chat roll up into them.
    top = {name for name, s in steps.items() if s["is_top_level"]}
    assert top == {"tool fetch", "invoke_agent researcher"}
    assert steps["invoke_agent researcher"]["step_key"] == "subagent:researcher"
    assert steps["chat inner"]["step_key"] == "model:gpt-x"
    assert steps["chat inner"]["top_step_id"] == steps["invoke_agent researcher"]["span_id"]
    assert steps["other http-attempt-2"]["step_level"] == 1
    assert steps["other http-attempt-2"]["consumption_ms"] is None  # nested: no share
    # Consumption: fetch 4000, subagent 3000; unattributed 10000 - 7000 = 3000.
    assert steps["tool fetch"]["consumption_ms"] == pytest.approx(4_000)
    assert steps["invoke_agent researcher"]["consumption_ms"] == pytest.approx(3_000)
    assert run_row(con, rid)["unattributed_ms"] == pytest.approx(3_000)
    assert run_row(con, rid)["steps"] == 5
    # The on-call waterfall: each top-level step followed by what is nested in it.
    order = load_run(con, rid).steps["name"].tolist()
    assert order == ["fetch", "http-attempt-1", "http-attempt-2", "researcher", "gpt-x"]


def test_subagent_with_its_own_budget_is_its_own_run(con):
    b = TraceBuilder()
    run = b.run(0, 10_000, 10_000)
    sub = b.span("subagent", 2_000, 8_000, parent=run, attributes={
        "budget.step.kind": "subagent", "budget.step.name": "helper", "budget.total_ms": 5_000})
    b.step(sub, "tool", "inner", 3_000, 8_000)
    store(con, b.finished())
    outer = run_row(con, b.trace_id(run))
    inner_id = f"{b.trace_id(run)}/{b.span_id(sub)}"
    inner = run_row(con, inner_id)
    # Outer: the subagent span is its top-level step (6000 ms); the inner tool belongs to the
    # inner run only. Inner: d = 2000 + 5000 = 7000; window [2000, 7000]; tool clipped to
    # [3000, 7000] = 4000; unattributed 1000; latest end 8000 >= 7000 → exhausted, overrun 1000.
    assert set(step_rows(con, b.trace_id(run))) == {"subagent"}
    assert outer["culprit_key"] == "subagent:helper"
    assert outer["culprit_ms"] == pytest.approx(6_000)
    assert step_rows(con, inner_id)["tool inner"]["consumption_ms"] == pytest.approx(4_000)
    assert inner["unattributed_ms"] == pytest.approx(1_000)
    assert inner["exhausted"] is True and inner["overrun_ms"] == pytest.approx(1_000)
    # The outer run's latest end counts the nested run's descendants too (8000 < 10000).
    assert outer["latest_end_ns"] == T0_NS + 10_000 * MS


def test_refused_step_makes_run_exhausted(con):
    b = TraceBuilder()
    run = b.run(0, 4_000, 10_000)
    b.step(run, "tool", "search", 0, 3_000)
    b.step(run, "tool", "report", 3_000, 3_000, **{"budget.outcome": "refused"})
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    # The run ended at 4000 < d = 10000, but a refused step marks it exhausted (docs/metrics.md §4).
    assert r["refused_steps"] == 1
    assert r["exhausted"] is True
    steps = step_rows(con, b.trace_id(run))
    assert steps["tool report"]["class"] == "refused"
    assert steps["tool report"]["consumption_ms"] == pytest.approx(0)


def test_stated_outcome_decides_exhaustion(con):
    b = TraceBuilder()
    completed_late = b.run(0, 12_000, 10_000, budget_run_outcome="completed")
    partial_early = b.run(0, 5_000, 10_000, budget_run_outcome="partial")
    # not an outcome docs/metrics.md §2 lists: counted as absent
    odd_value = b.run(0, 12_000, 10_000, budget_run_outcome="weird")
    store(con, b.finished())
    assert run_row(con, b.trace_id(completed_late))["exhausted"] is False
    assert run_row(con, b.trace_id(partial_early))["exhausted"] is True
    assert run_row(con, b.trace_id(odd_value))["exhausted"] is True  # 12000 >= d 10000


def test_explicit_absolute_deadline(con):
    b = TraceBuilder()
    # B = 10000 but the deadline is absolute: T0 + 6000 ms, earlier than s + B.
    deadline_ms = T0_NS // MS + 6_000
    run = b.run(0, 8_000, 10_000, budget_deadline__unix__ms=deadline_ms)
    b.step(run, "tool", "slow", 1_000, 8_000)
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    # d = 6000, e = min(8000, 6000) = 6000; slow clipped to [1000, 6000] = 5000;
    # unattributed [0, 1000) = 1000; overrun 8000 - 6000 = 2000; share 5000 / B 10000.
    assert r["deadline_ns"] == T0_NS + 6_000 * MS
    assert step_rows(con, b.trace_id(run))["tool slow"]["consumption_ms"] == pytest.approx(5_000)
    assert r["unattributed_ms"] == pytest.approx(1_000)
    assert r["overrun_ms"] == pytest.approx(2_000)
    assert r["culprit_share"] == pytest.approx(0.5)
    assert r["utilisation"] == pytest.approx(0.8)  # (8000 - 0) / 10000: on B, not d
    assert r["exhausted"] is True


def test_run_without_budget(con):
    b = TraceBuilder()
    run = b.run(0, 5_000, None)
    b.step(run, "tool", "search", 0, 5_000, **{"budget.outcome": "upstream_error"})
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    # A root without budget.total_ms is a run with an unknown budget: no budget metrics,
    # but its steps are classified and counted.
    assert r["budget_ms"] is None and r["utilisation"] is None and r["exhausted"] is None
    assert r["culprit_key"] is None and r["unattributed_ms"] is None
    step = step_rows(con, b.trace_id(run))["tool search"]
    assert step["class"] == "upstream_error" and step["consumption_ms"] is None


def test_run_below_root_has_compound_id(con):
    b = TraceBuilder()
    root = b.span("http request", 0, 10_000)  # root without budget: a run of unknown budget
    run = b.span("agent", 1_000, 9_000, parent=root, attributes={"budget.total_ms": 8_000})
    b.step(run, "model", "gpt", 1_000, 3_000)
    store(con, b.finished())
    ids = {row[0] for row in con.execute("SELECT run_id FROM runs").fetchall()}
    assert ids == {b.trace_id(root), f"{b.trace_id(root)}/{b.span_id(run)}"}
    # The model step belongs to its nearest run.
    assert set(step_rows(con, f"{b.trace_id(root)}/{b.span_id(run)}")) == {"model gpt"}
    assert step_rows(con, b.trace_id(root)) == {}


def _complex_trace(b: TraceBuilder):
    run = b.run(0, 11_000, 10_000)
    a = b.step(run, "tool", "a", 500, 7_000)
    b.step(a, "other", "a-inner", 600, 6_000, **{"http.response.status_code": 504})
    b.step(run, "model", "m", 3_000, 10_500)
    b.step(run, "tool", "w", 8_000, 9_000, **{"budget.side_effect": "write",
                                               "budget.idempotency_key": "k"})
    return run


def _snapshot(con):
    runs = con.execute("SELECT * EXCLUDE (week) FROM runs ORDER BY run_id").fetchall()
    steps = con.execute("SELECT * FROM steps ORDER BY trace_id, span_id").fetchall()
    return runs, steps


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_out_of_order_arrival_across_batches(tmp_path, seed):
    """Children before their root, one span per request, shuffled: same rows as one batch."""
    b = TraceBuilder()
    _complex_trace(b)
    spans = b.finished()
    whole = open_db(tmp_path, "whole.duckdb")
    store(whole, spans)
    expected = _snapshot(whole)
    parts = open_db(tmp_path, "parts.duckdb")
    shuffled = spans[:]
    random.Random(seed).shuffle(shuffled)
    for span in shuffled:
        store(parts, [span])
    assert _snapshot(parts) == expected
    # A run whose root has not arrived does not exist yet; its steps are not in any run.
    early = open_db(tmp_path, "early.duckdb")
    store(early, [s for s in spans if s.parent is not None])
    assert early.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    assert early.execute("SELECT count(*) FROM steps").fetchone() == (0,)


@pytest.mark.slow
def test_duplicate_delivery_changes_nothing(con):
    b = TraceBuilder()
    _complex_trace(b)
    spans = b.finished()
    assert store(con, spans) == len(spans)
    before = _snapshot(con)
    assert store(con, spans) == 0          # exporter retry: nothing stored twice
    assert store(con, spans[:2] + spans[:2]) == 0
    assert _snapshot(con) == before
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)


def test_rebuild_all_equals_incremental(con):
    b = TraceBuilder()
    _complex_trace(b)
    b.run(0, 1_000, None)
    store(con, b.finished())
    before = _snapshot(con)
    rebuild_all(con)
    assert _snapshot(con) == before


def test_iso_week_boundaries_in_utc(con):
    b = TraceBuilder()
    # Sunday 2026-11-29 23:59:59.999 UTC is still W48; Monday 2026-11-30 00:00 UTC is W49.
    # 2026-01-01 is a Thursday: ISO week 2026-W01. 2021-01-01 is a Friday: ISO week 2020-W53
    # (the ISO year, not the calendar year).
    monday_w49 = 1_795_996_800 * 10**9  # 2026-11-30T00:00:00Z
    cases = {
        "2026-W48": monday_w49 - MS,
        "2026-W49": monday_w49,
        "2026-W01": 1_767_225_600 * 10**9,   # 2026-01-01T00:00:00Z
        "2020-W53": 1_609_459_200 * 10**9,   # 2021-01-01T00:00:00Z
    }
    ids = {}
    for week, start_ns in cases.items():
        span = b.span("agent run", 0, 1_000, attributes={"budget.total_ms": 1_000},
                      t0_ns=start_ns)
        ids[week] = b.trace_id(span)
    store(con, b.finished())
    for week, rid in ids.items():
        assert run_row(con, rid)["week"] == week
