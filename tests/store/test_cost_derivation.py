"""Tokens and dollars of runs and steps (docs/metrics.md §11.2-§11.7), one test per rule, each
with hand-built spans and the numbers worked out by hand in the test.

Costs are mostly reported (budget.cost_usd, as an agent that knows its bill sends it), so the
arithmetic is the rule's, not a price table's; where a bundled price is used its rates are
written beside it. Times are ms after T0 (Monday 2026-11-23 10:00 UTC, trace_builder).
"""

from __future__ import annotations

import pytest

from store.testing import PendingDerivations, refresh_touched
from tests.support.cost_rows import metered, nano
from tests.support.trace_builder import (
    MS,
    T0_NS,
    TraceBuilder,
    open_db,
    run_row,
    step_rows,
    store,
)

OP = "gen_ai.operation.name"
CHAT = {OP: "chat"}


@pytest.fixture
def con(tmp_path):
    connection = open_db(tmp_path)
    yield connection
    connection.close()


def cost(dollars: str) -> dict[str, object]:
    return {"budget.cost_usd": dollars}


def test_the_culprit_spent_most_and_the_crosser_crossed_the_line(con):
    """B$ = $1.00. By end: A (0-5000 ms) $0.70, cumulative $0.70; B (5000-6000) $0.20, $0.90;
    C (6000-7000) $0.15, $1.05 >= $1.00: C crossed, with $0.90 spent before it and $1.05
    after. The culprit is A (share 0.70); the run is over by $0.05, at 105 %."""
    b = TraceBuilder()
    run = b.run(0, 8_000, 10_000, budget_total__usd=1.0)
    b.step(run, "model", "big", 0, 5_000, **cost("0.70"))
    b.step(run, "tool", "search", 5_000, 6_000, **cost("0.20"))
    b.step(run, "model", "small", 6_000, 7_000, **cost("0.15"))
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    assert (r["cost_nano"], r["usd_budget_nano"], r["usd_budget_source"]) == (
        nano("1.05"), nano("1"), "span")
    assert r["usd_exhausted"] is True and r["cost_utilisation"] == pytest.approx(1.05)
    assert (r["cost_culprit_key"], r["cost_culprit_step"], r["cost_culprit_nano"]) == (
        "model:big", 1, nano("0.70"))
    assert r["cost_culprit_share"] == pytest.approx(0.70)
    assert (r["cost_crosser_key"], r["cost_crosser_step"]) == ("model:small", 3)
    assert (r["cost_before_crossing_nano"], r["cost_after_crossing_nano"]) == (
        nano("0.90"), nano("1.05"))
    assert r["overrun_usd_nano"] == nano("0.05")
    assert r["cost_complete"] is True
    # time is untouched: the run ended at 8 s of a 10 s budget
    assert (r["exhausted"], r["culprit_key"]) == (False, "model:big")
    steps = step_rows(con, b.trace_id(run))
    assert [steps[n]["cost_share"] for n in ("model big", "tool search", "model small")] == \
        pytest.approx([0.70, 0.20, 0.15])


def test_a_run_that_did_not_reach_its_dollar_budget_has_no_crosser(con):
    b = TraceBuilder()
    run = b.run(0, 2_000, None, budget_total__usd="0.5")
    b.step(run, "model", "m", 0, 1_000, **cost("0.30"))
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    assert (r["usd_exhausted"], r["cost_crosser_span_id"], r["cost_before_crossing_nano"],
            r["overrun_usd_nano"]) == (False, None, None, 0)
    assert r["cost_utilisation"] == pytest.approx(0.6)


def test_parallel_calls_each_pay_in_full(con):
    """Three tool calls over the same second cost $0.10 each: each consumes $0.10 of B$ =
    $0.25 (share 0.4, not clipped: the shares add up to 1.2), where the time they run is
    shared (333.3 ms each of the 1000 ms)."""
    b = TraceBuilder()
    run = b.run(0, 1_000, 2_000, budget_total__usd=0.25)
    for name in ("a", "b", "c"):
        b.step(run, "tool", name, 0, 1_000, **cost("0.10"))
    store(con, b.finished())
    steps = step_rows(con, b.trace_id(run))
    for name in ("a", "b", "c"):
        step = steps[f"tool {name}"]
        assert step["consumption_usd_nano"] == nano("0.10")
        assert step["cost_share"] == pytest.approx(0.4)
        assert step["consumption_ms"] == pytest.approx(1000 / 3)
    r = run_row(con, b.trace_id(run))
    # $0.10 + $0.10 = $0.20 < $0.25; the third call crosses (all end at once: by span id)
    assert r["cost_nano"] == nano("0.30") and r["cost_before_crossing_nano"] == nano("0.20")
    assert r["cost_culprit_step"] == 1  # a tie: the earliest start, then the span id


def test_a_failed_call_that_returned_usage_bills_and_a_429_without_usage_does_not(con):
    """A 500 that returned usage counts (1000 in + 100 out of gpt-4o: 1000 × $2.50 + 100 ×
    $10 per million = $0.0035); a 429 without usage is unmetered and presumed unbilled, so the
    cost stays complete; an ok model call without usage is possibly billed, so it does not."""
    b = TraceBuilder()
    run = b.run(0, 3_000, None)
    b.span("failed", 0, 1_000, parent=run, error=True, attributes={
        **CHAT, "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai",
        "http.response.status_code": 500, "gen_ai.usage.input_tokens": 1000,
        "gen_ai.usage.output_tokens": 100})
    b.span("limited", 1_000, 1_100, parent=run, error=True, attributes={
        **CHAT, "gen_ai.request.model": "gpt-4o", "http.response.status_code": 429})
    store(con, b.finished())
    steps = step_rows(con, b.trace_id(run))
    assert (steps["failed"]["class"], steps["failed"]["cost_nano"]) == (
        "upstream_error", nano("0.0035"))
    assert (steps["limited"]["unmetered"], steps["limited"]["possibly_billed"]) == (True, False)
    r = run_row(con, b.trace_id(run))
    assert (r["cost_nano"], r["unmetered_steps"], r["unmetered_billable_steps"],
            r["cost_complete"]) == (nano("0.0035"), 1, 0, True)

    b2 = TraceBuilder(seed=2)
    run2 = b2.run(0, 1_000, None)
    b2.span("silent", 0, 1_000, parent=run2, attributes={**CHAT, "gen_ai.request.model": "gpt-4o"})
    store(con, b2.finished())
    r2 = run_row(con, b2.trace_id(run2))
    assert (r2["unmetered_billable_steps"], r2["cost_complete"]) == (1, False)
    assert step_rows(con, b2.trace_id(run2))["silent"]["possibly_billed"] is True


@pytest.mark.parametrize("evidence", [
    {"error.type": "budget_exceeded"},  # LiteLLM proxy's error type
    {"exception": "litellm.exceptions.BudgetExceededError"},
    {"message": "BudgetExceededError: Budget has been exceeded! Current cost: 1.02, "
                "Max budget: 1.0"},
])
def test_a_gateways_budget_refusal_is_refused_by_usd_whatever_its_status(con, evidence):
    """LiteLLM refuses the next call once a key's budget is spent, with a 429 (rule 1b:
    `budgetexceeded` in error.type, an exception type or message): refused, by usd, not an
    upstream failure; the run is usd-exhausted though its B$ is unknown (enforced by the
    gateway), and not time-exhausted: it ended well before its deadline (§4 as revised)."""
    b = TraceBuilder()
    run = b.run(0, 2_000, 10_000)
    b.step(run, "model", "first", 0, 1_000, **cost("0.40"))
    attributes = {**CHAT, "gen_ai.request.model": "gpt-4o", "http.response.status_code": 429}
    if "error.type" in evidence:
        attributes["error.type"] = evidence["error.type"]
    b.span("refused call", 1_000, 1_010, parent=run, error=True, attributes=attributes,
           exceptions=[evidence.get("exception", "litellm.exceptions.RateLimitError")],
           messages=[evidence.get("message", "rate limited")])
    store(con, b.finished())
    step = step_rows(con, b.trace_id(run))["refused call"]
    assert (step["class"], step["refused_by"], step["possibly_billed"]) == ("refused", "usd",
                                                                            False)
    r = run_row(con, b.trace_id(run))
    assert (r["usd_exhausted"], r["usd_budget_nano"], r["exhausted"], r["refused_steps"]) == (
        True, None, False, 1)
    assert r["cost_crosser_span_id"] is None and r["cost_utilisation"] is None


def test_a_step_refused_without_saying_by_what_is_refused_by_time(con):
    b = TraceBuilder()
    run = b.run(0, 1_000, 10_000)
    b.step(run, "tool", "t", 0, 10, **{"budget.outcome": "refused"})
    b.step(run, "tool", "u", 10, 20, **{"budget.outcome": "refused",
                                        "budget.refused_by": "Tokens"})
    store(con, b.finished())
    steps = step_rows(con, b.trace_id(run))
    assert (steps["tool t"]["refused_by"], steps["tool u"]["refused_by"]) == ("time", "tokens")
    r = run_row(con, b.trace_id(run))
    assert (r["exhausted"], r["tokens_exhausted"], r["usd_exhausted"]) == (True, True, None)


def test_a_stated_outcome_naming_another_budget_is_not_time_exhaustion(con):
    """§4 as revised: `exhausted` with budget.run.exhausted_by = usd is a dollar exhaustion;
    the run is time-exhausted only when its outcome names time (or nothing)."""
    b = TraceBuilder()
    by_usd = b.run(0, 1_000, 10_000, budget_run_outcome="exhausted",
                   budget_run_exhausted__by="usd")
    by_time = b.run(0, 1_000, 10_000, budget_run_outcome="partial")
    store(con, b.finished())
    usd, time = run_row(con, b.trace_id(by_usd)), run_row(con, b.trace_id(by_time))
    assert (usd["exhausted"], usd["usd_exhausted"], usd["exhausted_by"]) == (False, True, "usd")
    assert (time["exhausted"], time["usd_exhausted"], time["exhausted_by"]) == (True, None, None)


def test_an_aggregate_is_never_counted_and_is_shown_as_reported(con):
    """A framework's total on its agent span (Logfire's operation.cost and usage over the
    whole session) above the calls that carry their own: the calls are metered (1000 + 2000
    tokens, $0.01 + $0.02), the agent span is not; its $0.05 is the reported total. The Vercel
    AI SDK's ai.generateText carries the sum of its doGenerate steps: never added either."""
    b = TraceBuilder()
    run = b.run(0, 5_000, None)
    agent = b.span("invoke_agent support", 0, 5_000, parent=run, attributes={
        OP: "invoke_agent", "gen_ai.agent.name": "support", "operation.cost": 0.05,
        "gen_ai.usage.input_tokens": 2500, "gen_ai.usage.output_tokens": 500})
    b.span("chat one", 0, 1_000, parent=agent, attributes={
        **CHAT, "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 900,
        "gen_ai.usage.output_tokens": 100, "operation.cost": 0.01})
    b.span("chat two", 1_000, 3_000, parent=agent, attributes={
        **CHAT, "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 1600,
        "gen_ai.usage.output_tokens": 400, "operation.cost": 0.02})
    outer = b.span("ai.generateText", 3_000, 5_000, parent=agent, attributes={
        "ai.operationId": "ai.generateText", "ai.usage.inputTokens": 70,
        "ai.usage.outputTokens": 30})
    b.span("ai.generateText.doGenerate", 3_000, 4_900, parent=outer, attributes={
        "ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "m",
        "ai.usage.inputTokens": 70, "ai.usage.outputTokens": 30,
        "gen_ai.usage.input_tokens": 70, "gen_ai.usage.output_tokens": 30,
        "budget.cost_usd": 0.001})
    store(con, b.finished())
    assert metered(con, "invoke_agent support")["is_metered"] is False
    assert metered(con, "ai.generateText")["is_metered"] is False
    r = run_row(con, b.trace_id(run))
    assert (r["tokens"], r["cost_nano"], r["reported_total_nano"]) == (
        1000 + 2000 + 100, nano("0.031"), nano("0.05"))
    # no dollar budget: no share of it, so no culprit (§11.6 is for a run with B$)
    assert (r["usd_budget_nano"], r["cost_culprit_span_id"], r["cost_utilisation"]) == (
        None, None, None)
    # the agent is alone under the run: transparent, its calls are the top-level steps
    steps = step_rows(con, b.trace_id(run))
    assert "invoke_agent support" not in steps
    assert steps["chat two"]["consumption_usd_nano"] == nano("0.02")


def test_what_no_top_level_step_holds_is_unattributed(con):
    """A carrier that is no step and lies under none (a span of the agent's own code, below
    the run) is metered but unattributed: the run's cost is consumption + unattributed."""
    b = TraceBuilder()
    run = b.run(0, 2_000, None, budget_total__usd=1)
    b.step(run, "tool", "fetch", 0, 1_000, **cost("0.25"))
    b.span("summarise (own code)", 1_000, 2_000, parent=run, attributes=cost("0.5"))
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    assert (r["cost_nano"], r["unattributed_cost_nano"]) == (nano("0.75"), nano("0.5"))
    assert metered(con, "summarise (own code)")["top_step_id"] is None
    assert step_rows(con, b.trace_id(run))["tool fetch"]["consumption_usd_nano"] == nano("0.25")


def test_a_tool_lifted_out_of_a_model_step_pays_in_its_own_top_level_step(con):
    """streamText's tool span is a child of its model span (§9): the tool stands at the
    model's level and the $0.30 its call cost belongs to it; the model step's own cost (what
    lies under it) still includes it, its consumption does not."""
    b = TraceBuilder()
    run = b.run(0, 4_000, None, budget_total__usd=1)
    model = b.span("doStream", 0, 3_000, parent=run, attributes={
        "ai.operationId": "ai.streamText.doStream", "ai.model.id": "m",
        "ai.usage.inputTokens": 10, "ai.usage.outputTokens": 5, "budget.cost_usd": 0.10})
    b.span("toolCall image", 1_000, 2_000, parent=model, attributes={
        "ai.operationId": "ai.toolCall", "ai.toolCall.name": "image", "budget.cost_usd": 0.3})
    store(con, b.finished())
    steps = step_rows(con, b.trace_id(run))
    tool, stream = steps["toolCall image"], steps["doStream"]
    assert tool["is_top_level"] and tool["consumption_usd_nano"] == nano("0.3")
    # the model span is an aggregate of the tool's cost below it: not metered, nor priced
    assert metered(con, "doStream")["is_metered"] is False
    assert stream["consumption_usd_nano"] == 0 and stream["cost_nano"] == nano("0.3")
    assert run_row(con, b.trace_id(run))["cost_culprit_key"] == "tool:image"


def test_one_call_recorded_twice_counts_once(con):
    """A framework's model span around the client's (§9, one call, two spans) with the same
    usage on both: the outer one is a wrapper, never metered; 500 tokens, once."""
    b = TraceBuilder()
    run = b.run(0, 1_000, None)
    usage = {"gen_ai.usage.input_tokens": 400, "gen_ai.usage.output_tokens": 100}
    outer = b.span("framework chat", 0, 1_000, parent=run, attributes={
        **CHAT, "gen_ai.request.model": "fake-model", **usage})
    b.span("client chat", 10, 990, parent=outer, attributes={
        **CHAT, "gen_ai.request.model": "openai/fake-model", **usage})
    store(con, b.finished())
    assert (metered(con, "framework chat")["is_metered"],
            metered(con, "client chat")["is_metered"]) == (False, True)
    r = run_row(con, b.trace_id(run))
    assert (r["tokens"], r["unmetered_steps"]) == (500, 0)


def test_a_wrapper_twin_that_alone_carries_usage_stands_for_its_call(con):
    """When only the outer span of one call carries the usage, it is metered and belongs to
    the step it wraps, which is then not unmetered."""
    b = TraceBuilder()
    run = b.run(0, 1_000, None)
    outer = b.span("framework chat", 0, 1_000, parent=run, attributes={
        **CHAT, "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 2, "budget.cost_usd": 0.004})
    b.span("client chat", 10, 990, parent=outer, attributes={**CHAT, "gen_ai.request.model": "m"})
    store(con, b.finished())
    row = metered(con, "framework chat")
    steps = step_rows(con, b.trace_id(run))
    assert row["is_metered"] and row["top_step_id"] == steps["client chat"]["span_id"]
    assert (steps["client chat"]["unmetered"], steps["client chat"]["cost_nano"]) == (
        False, nano("0.004"))


def test_an_unpriced_model_leaves_the_cost_a_lower_bound_and_is_named(con):
    """gpt-4o (1000 in: $0.0025) is priced, acme-internal-7b is not: the run's cost is
    >= $0.0025, incomplete, with one unpriced step, named."""
    b = TraceBuilder()
    run = b.run(0, 2_000, None)
    b.span("priced", 0, 1_000, parent=run, attributes={
        **CHAT, "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai",
        "gen_ai.usage.input_tokens": 1000})
    b.span("unpriced", 1_000, 2_000, parent=run, attributes={
        **CHAT, "gen_ai.request.model": "acme-internal-7b", "gen_ai.usage.input_tokens": 50,
        "gen_ai.usage.output_tokens": 5})
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    assert (r["cost_nano"], r["cost_complete"], r["unpriced_steps"], r["unpriced_models"]) == (
        nano("0.0025"), False, 1, ["acme-internal-7b"])
    step = step_rows(con, b.trace_id(run))["unpriced"]
    assert (step["cost_nano"], step["cost_source"], step["cost_complete"], step["tokens"]) == (
        None, "unpriced", False, 55)


def test_a_dated_price_change_charges_a_retry_after_it_the_new_price(con):
    """genai-prices' gemini-4-argon costs $2 / $10 per million until 2026-12-01, then $4 /
    $20. The first call (on 2026-11-23) of 100,000 in and 10,000 out costs $0.2 + $0.1 =
    $0.30; its retry on 2026-12-01 00:00:05 UTC, $0.4 + $0.2 = $0.60. The run spans both."""
    change_ms = (1_796_083_200 * 10**9 - T0_NS) // MS  # 2026-12-01T00:00:00Z
    b = TraceBuilder()
    run = b.run(0, change_ms + 10_000, None)
    usage = {**CHAT, "gen_ai.request.model": "gemini-4-argon", "gen_ai.system": "gcp.gemini",
             "gen_ai.usage.input_tokens": 100_000, "gen_ai.usage.output_tokens": 10_000}
    b.span("first", 0, 1_000, parent=run, attributes=usage)
    b.span("retry", change_ms + 5_000, change_ms + 9_000, parent=run, attributes=usage)
    store(con, b.finished())
    assert metered(con, "first")["cost_nano"] == nano("0.30")
    assert metered(con, "retry")["cost_nano"] == nano("0.60")
    assert run_row(con, b.trace_id(run))["cost_nano"] == nano("0.90")


def test_a_tiered_price_follows_the_calls_own_input(con):
    """claude-sonnet-4-5: $3 / $0.30 / $3.75 / $15 up to 200,000 input tokens (cache
    included), $6 / $0.60 / $7.50 / $22.50 above, for all its tokens. 150,000 fresh + 60,000
    cache read = 210,000 input: 150,000 × $6 + 60,000 × $0.60 + 1,000 × $22.50 per million =
    $0.9 + $0.036 + $0.0225 = $0.9585; the same call with 140,000 input stays in the base
    tier: 80,000 × $3 + 60,000 × $0.30 + 1,000 × $15 = $0.24 + $0.018 + $0.015 = $0.273."""
    b = TraceBuilder()
    run = b.run(0, 2_000, None)
    for name, fresh in (("above", 150_000), ("below", 80_000)):
        b.span(name, 0, 1_000, parent=run, attributes={
            **CHAT, "gen_ai.request.model": "claude-sonnet-4-5", "gen_ai.system": "anthropic",
            "gen_ai.usage.input_tokens": fresh + 60_000,
            "gen_ai.usage.cache_read.input_tokens": 60_000, "gen_ai.usage.output_tokens": 1_000})
    store(con, b.finished())
    assert metered(con, "above")["cost_nano"] == nano("0.9585")
    assert metered(con, "below")["cost_nano"] == nano("0.273")


def test_a_token_budget_its_crosser_and_exhaustion(con):
    """Btok = 10,000 (budget.total_tokens). By end: plan 4,000 (4,000), act 5,000 (9,000),
    check 2,000 (11,000 >= 10,000): check crosses with 9,000 before and 11,000 after; act is
    the token culprit (0.5); over by 1,000; 110 %."""
    b = TraceBuilder()
    run = b.run(0, 3_000, None, budget_total__tokens=10_000)
    for index, (name, tokens) in enumerate((("plan", 4_000), ("act", 5_000), ("check", 2_000))):
        b.span(name, index * 1_000, index * 1_000 + 900, parent=run, attributes={
            **CHAT, "gen_ai.request.model": name, "gen_ai.usage.input_tokens": tokens})
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    assert (r["tokens"], r["token_budget"], r["token_budget_source"], r["tokens_exhausted"]) == (
        11_000, 10_000, "span", True)
    assert (r["token_culprit_key"], r["token_culprit_tokens"], r["token_culprit_step"]) == (
        "model:act", 5_000, 2)
    assert r["token_culprit_share"] == pytest.approx(0.5)
    assert (r["token_crosser_key"], r["tokens_before_crossing"], r["tokens_after_crossing"],
            r["overrun_tokens"]) == ("model:check", 9_000, 11_000, 1_000)
    assert r["token_utilisation"] == pytest.approx(1.1)
    steps = step_rows(con, b.trace_id(run))
    assert steps["act"]["token_share"] == pytest.approx(0.5)


def test_spend_after_the_deadline_still_counts(con):
    """Money spent late is spent: a call that ends after the 1 s deadline counts in full."""
    b = TraceBuilder()
    run = b.run(0, 3_000, 1_000)
    b.step(run, "model", "slow", 500, 3_000, **cost("0.2"))
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    assert (r["cost_nano"], r["exhausted"]) == (nano("0.2"), True)


def test_a_span_whose_parent_never_arrived_is_counted_under_the_run(con):
    """A carrier whose parent is missing hangs below its trace's run span (§9)."""
    b = TraceBuilder()
    run = b.run(0, 2_000, None, budget_total__usd=1)
    lost = b.span("lost parent", 0, 2_000, parent=run)
    b.step(lost, "tool", "orphan", 0, 1_000, **cost("0.125"))
    spans = [s for s in b.finished() if s.name != "lost parent"]
    con_spans = store(con, spans)
    assert con_spans == 2
    r = run_row(con, b.trace_id(run))
    assert (r["cost_nano"], r["cost_culprit_key"]) == (nano("0.125"), "tool:orphan")


def test_runs_without_any_usage_measure_no_tokens_and_the_same_time(con):
    b = TraceBuilder()
    run = b.run(0, 2_000, 1_000)
    b.step(run, "tool", "t", 0, 1_500)
    store(con, b.finished())
    r = run_row(con, b.trace_id(run))
    assert (r["tokens"], r["cost_nano"], r["cost_complete"], r["usd_exhausted"]) == (
        0, 0, True, None)
    assert (r["exhausted"], r["culprit_ms"]) == (True, 1000.0)
    assert con.execute("SELECT count(*) FROM metered_spans").fetchone() == (0,)


def test_a_trace_derived_again_replaces_its_metered_spans(con):
    """A late span arrives: the trace is derived again and its rows replaced, not doubled."""
    b = TraceBuilder()
    run = b.run(0, 2_000, None)
    b.step(run, "tool", "t", 0, 1_000, **cost("0.1"))
    spans = b.finished()
    store(con, [s for s in spans if s.name != "agent run"])
    store(con, [s for s in spans if s.name == "agent run"])
    PendingDerivations(refresh_touched).run(con)
    assert con.execute("SELECT count(*) FROM metered_spans").fetchone() == (1,)
    assert run_row(con, b.trace_id(run))["cost_nano"] == nano("0.1")
