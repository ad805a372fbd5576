"""A change of prices (`prices set/unset`) or of a declared token or dollar budget re-measures
the stored metered spans, runs and steps (store/derive/sql/derive_budgets.sql, then
derive_cost.sql) instead of deriving their spans again (docs/metrics.md §10, §11.8): the numbers
must be exactly those a full derivation gives, change after change, for runs with aggregates,
lifted tools, a wrapper twin, unpriced and bundled-priced models, crossers and a run's own
dollar budget."""

from __future__ import annotations

import duckdb
import pytest

from store import Change, PriceChange, apply, apply_price, parse_from, pending_derivations
from store.testing import PendingDerivations, refresh_touched
from tests.support.trace_builder import TraceBuilder, open_db, store

# Its spans are stored by a fixture, before the test runs: the cost recorder
# (tests/support/cost_recorder.py) would run it and see nothing.
COST_RECORDER_SEES_NOTHING = True

CHAT = {"gen_ai.operation.name": "chat"}
PICO = 10**12
CHANGES: tuple[Change | PriceChange, ...] = (
    PriceChange("set", "acme-7b", "", None, PICO, 2 * PICO),
    Change("set", "support", usd_nano=10**6, tokens=3_000),
    PriceChange("set", "gpt-4o", "openai", parse_from("2026-11-23"), 5 * PICO, 20 * PICO,
                PICO),
    Change("set_default", None, usd_nano=5 * 10**5),
    PriceChange("set", "acme*", "", None, 0, 0),
    Change("unset", "support", dimensions=("tokens",)),
    PriceChange("unset", "acme-7b"),
    PriceChange("unset", "gpt-4o", "openai", parse_from("2026-11-23")),
    Change("set", "support", 9_000),
    Change("unset", "support"),
    Change("unset_default"),
)


def _traces() -> TraceBuilder:
    b = TraceBuilder()
    usage = {"gen_ai.usage.input_tokens": 1_000, "gen_ai.usage.output_tokens": 100}
    # an agent's total above its calls; a priced and an unpriced model; a tool's reported cost
    run = b.run(0, 6_000, 10_000, gen__ai_agent_name="support")
    agent = b.span("agent", 0, 6_000, parent=run, attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper",
        "operation.cost": 0.05, **usage})
    b.span("gpt", 0, 1_000, parent=agent, attributes={
        **CHAT, "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai", **usage})
    b.span("acme", 1_000, 2_000, parent=agent, attributes={
        **CHAT, "gen_ai.request.model": "acme-7b", **usage})
    b.step(agent, "tool", "search", 2_000, 3_000, **{"budget.cost_usd": "0.0004"})
    b.span("silent", 3_000, 3_500, parent=agent, attributes={
        **CHAT, "gen_ai.request.model": "gpt-4o"})
    # a tool lifted out of its model call, with a cost of its own; a run with its own $0.01
    stream = b.run(0, 5_000, None, gen__ai_agent_name="support", budget_total__usd=0.01)
    model = b.span("doStream", 0, 4_000, parent=stream, attributes={
        "ai.operationId": "ai.streamText.doStream", "ai.model.id": "acme-7b",
        "ai.usage.inputTokens": 2_000, "ai.usage.outputTokens": 50})
    b.span("toolCall", 1_000, 2_000, parent=model, attributes={
        "ai.operationId": "ai.toolCall", "ai.toolCall.name": "image", "budget.cost_usd": 0.003})
    # one call recorded twice, another agent's run
    other = b.run(0, 2_000, None, gen__ai_agent_name="billing")
    outer = b.span("framework chat", 0, 2_000, parent=other, attributes={
        **CHAT, "gen_ai.request.model": "acme-7b", **usage})
    b.span("client chat", 10, 1_990, parent=outer, attributes={
        **CHAT, "gen_ai.request.model": "acme-7b", **usage})
    return b


def _rows(con: duckdb.DuckDBPyConnection) -> tuple[list[tuple], ...]:
    return tuple(con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
                 for table in ("runs", "steps", "metered_spans"))


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
    by_derivation = PendingDerivations(refresh_touched)
    by_measure = pending_derivations()  # as every trigger derives (store/derive/scheduling.py)
    costs = set()
    for change in CHANGES:
        do = apply_price if isinstance(change, PriceChange) else apply
        assert do(full, change).changed and do(measured, change).changed, change
        assert measured.execute("SELECT count(*) FROM pending_measurements").fetchone()[0] > 0
        by_derivation.run(full)
        by_measure.run(measured)
        assert measured.execute("SELECT count(*) FROM pending_measurements").fetchone()[0] == 0
        assert _rows(measured) == _rows(full), change
        costs.add(tuple(row[0] for row in full.execute(
            "SELECT cost_nano FROM runs ORDER BY run_id").fetchall()))
    assert len(costs) > 3  # the changes moved the numbers


def test_a_price_change_marks_only_the_traces_it_prices(pair) -> None:
    _, measured = pair
    applied = apply_price(measured, PriceChange("set", "gpt-4o", "openai", None, PICO, PICO))
    # only the first run has a gpt-4o span (the silent one carries no usage)
    assert (applied.changed, applied.runs, applied.traces, applied.matching_spans) == (
        True, 1, 1, 1)
    reported = apply_price(measured, PriceChange("set", "nobody-uses-me", "", None, 0, 0))
    assert (reported.changed, reported.runs, reported.matching_spans) == (True, 0, 0)
