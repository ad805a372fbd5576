"""A change of a declared budget re-measures the stored runs and steps (store/derive/sql/
derive_budgets.sql) instead of deriving their spans again: the numbers must be exactly those a
full derivation gives, for runs with lifted tools, transparent agents, caps, a run's own
deadline and a run with its own budget."""

from __future__ import annotations

import duckdb
import pytest

from store import Change, apply, pending_derivations
from store.testing import PendingDerivations, refresh_touched
from tests.support.trace_builder import T0_NS, TraceBuilder, open_db, store

OP = "gen_ai.operation.name"
CHANGES = (Change("set", "support", 6_000), Change("cap", "tool:a", 1_500),
           Change("set_default", None, 3_000), Change("set", "support", 2_500),
           Change("cap", "model:gpt-v", 2_000), Change("uncap", "tool:a"),
           Change("unset", "support"), Change("unset_default"))


def _traces() -> TraceBuilder:
    b = TraceBuilder()
    # a tool lifted out of a model call (the model is not active while the tools run)
    stream = b.run(0, 10_000, None, gen__ai_agent_name="support")
    model = b.span("doStream", 0, 6_000, parent=stream, attributes={
        "ai.operationId": "ai.streamText.doStream", "ai.model.id": "gpt-v"})
    b.span("toolCall a", 1_000, 3_000, parent=model, attributes={
        "ai.operationId": "ai.toolCall", "ai.toolCall.name": "a"})
    b.span("toolCall b", 2_000, 4_000, parent=model, attributes={
        "ai.operationId": "ai.toolCall", "ai.toolCall.name": "b"})
    b.span("toolCall a", 7_000, 9_500, parent=stream, attributes={
        "ai.operationId": "ai.toolCall", "ai.toolCall.name": "a"})
    # a lone agent wrapping the steps, and a run with its own deadline
    wrapped = b.run(0, 8_000, None, gen__ai_agent_name="support",
                    budget_deadline__unix__ms=T0_NS // 1_000_000 + 4_000)
    agent = b.span("agent", 0, 8_000, parent=wrapped,
                   attributes={OP: "invoke_agent", "gen_ai.agent.name": "helper"})
    b.span("chat", 0, 5_000, parent=agent, attributes={OP: "chat",
                                                         "gen_ai.request.model": "gpt-v"})
    b.step(agent, "tool", "a", 5_000, 7_900, **{"budget.allocated_ms": 2_000})
    # another agent's run, and one with its own budget
    other = b.run(0, 4_000, None, gen__ai_agent_name="billing")
    b.step(other, "tool", "a", 0, 4_000)
    own = b.run(0, 4_000, 1_000, gen__ai_agent_name="support")
    b.step(own, "model", "gpt-v", 0, 3_000)
    return b


def _rows(con: duckdb.DuckDBPyConnection) -> tuple[list[tuple], list[tuple]]:
    return (con.execute("SELECT * FROM runs ORDER BY ALL").fetchall(),
            con.execute("SELECT * FROM steps ORDER BY ALL").fetchall())


@pytest.fixture
def pair(tmp_path):
    spans = _traces().finished()
    full, measured = open_db(tmp_path, "full.duckdb"), open_db(tmp_path, "measured.duckdb")
    for con in (full, measured):
        store(con, spans)
    yield full, measured
    full.close()
    measured.close()


@pytest.mark.slow
def test_re_measuring_gives_what_a_full_derivation_gives(pair) -> None:
    full, measured = pair
    assert measured.execute("SELECT count(*) FROM step_lifts").fetchone()[0] == 2
    by_derivation = PendingDerivations(refresh_touched)
    by_measure = pending_derivations()  # as every trigger derives (store/derive/scheduling.py)
    for change in CHANGES:
        assert apply(full, change).changed and apply(measured, change).changed
        assert measured.execute("SELECT count(*) FROM pending_measurements").fetchone()[0] > 0
        by_derivation.run(full)
        by_measure.run(measured)
        assert measured.execute("SELECT count(*) FROM pending_measurements").fetchone()[0] == 0
        assert _rows(measured) == _rows(full), change


def test_a_trace_with_new_spans_is_derived_in_full(pair) -> None:
    _, measured = pair
    apply(measured, Change("set_default", None, 3_000))
    measured.execute("INSERT INTO pending_derivations SELECT trace_id, now() FROM runs")
    derivations = pending_derivations()
    derivations.run(measured)
    assert measured.execute("SELECT count(*) FROM pending_measurements").fetchone()[0] == 0
    assert measured.execute("SELECT count(*) FROM pending_derivations").fetchone()[0] == 0
    assert measured.execute("SELECT count(*) FROM runs WHERE budget_source = 'declared'"
                            ).fetchone()[0] == 3
