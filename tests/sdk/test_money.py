"""The budget SDK spends money and tokens as it spends time (docs/metrics.md §2, §11): the run's
dollar and token budgets, a model step's hold, allocation and refusal, what it records and what
that costs, nesting, the ladder, the run's outcome, bad input, and 64 calls at once from threads
and from tasks never holding and spending more than the budget.

Arithmetic is checked against figures worked out by hand here (USD per million tokens times
tokens, in nano-dollars), never against the SDK's own ledger alone."""

from __future__ import annotations

import asyncio
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from budgetscope_sdk import BudgetExhausted, ManualClock, Price, RunBudget
from budgetscope_sdk.ledger import Ledger

from tests.sdk.support.capture import capture

GPT = Price(input=2.5, output=10)  # $2.50 / $10 per million tokens


def run(spans, total: float = 60, **options) -> RunBudget:
    return RunBudget(total, tracer=spans.tracer, clock=ManualClock(), **options)


def by_name(spans, name: str) -> list[dict]:
    return [step for step in spans.steps() if step["budget.step.name"] == name]


# -- the run span ---------------------------------------------------------------------------
def test_run_span_carries_its_dollar_and_token_budgets_each_optional() -> None:
    spans = capture()
    with run(spans, usd=0.5, tokens=200_000, reserve_usd=0.02, agent="a"):
        pass
    with run(spans, usd=1.25, agent="b"):
        pass
    with run(spans, tokens=5000, agent="c"):
        pass
    with run(spans, agent="d"):
        pass
    runs = {span.attributes["gen_ai.agent.name"]: dict(span.attributes) for span in spans.spans()}
    assert (runs["a"]["budget.total_usd"], runs["a"]["budget.total_tokens"],
            runs["a"]["budget.reserve_usd"]) == (0.5, 200_000, 0.02)
    assert runs["b"]["budget.total_usd"] == 1.25 and "budget.total_tokens" not in runs["b"]
    assert "budget.reserve_usd" not in runs["b"]
    assert runs["c"]["budget.total_tokens"] == 5000 and "budget.total_usd" not in runs["c"]
    assert not {key for key in runs["d"] if "usd" in key or "tokens" in key}


# -- allocation, holds, stamps ---------------------------------------------------------------
def test_parallel_calls_hold_their_estimates_so_the_third_is_shrunk_and_the_fourth_refused(
        ) -> None:
    spans = capture()
    # $0.10, $0.01 of it the reserve: $0.09 for ordinary calls. Each call: 2,000 input tokens
    # ($0.005) and up to 3,000 output tokens ($0.03), so a whole call holds $0.035.
    with run(spans, usd=0.10, reserve_usd=0.01) as budget:
        calls = [budget.step("model", "gpt", max_output_tokens=3000, price=GPT,
                             input_tokens=2000) for _ in range(3)]
        assert [call.max_tokens for call in calls] == [3000, 3000, 1500]  # $0.09 − 2 × 0.035
        assert [round(call.held_usd, 9) for call in calls] == [0.035, 0.035, 0.02]
        with pytest.raises(BudgetExhausted, match="left beyond the reserve") as refused:
            budget.step("model", "gpt", max_output_tokens=3000, price=GPT, input_tokens=2000)
        assert refused.value.refused_by == "usd"
        for call, output in zip(calls, (2500, 3000, 1500), strict=True):
            with call:
                call.record_usage(input_tokens=2000, output_tokens=output)
    steps = by_name(spans, "gpt")
    admitted = [step for step in steps if step.get("budget.outcome") != "refused"]
    (refusal,) = [step for step in steps if step.get("budget.outcome") == "refused"]
    # What was left before each call's own hold, the others' holds counted.
    assert [step["budget.remaining_usd"] for step in admitted] == [0.1, 0.065, 0.03]
    assert [step["budget.allocated_tokens"] for step in admitted] == [3000, 3000, 1500]
    assert (refusal["budget.remaining_usd"], refusal["budget.refused_by"]) == (0.01, "usd")
    assert "budget.allocated_tokens" not in refusal and "budget.allocated_ms" not in refusal
    # Costs: 2,000 × 2.5 + output × 10, per million.
    assert [step["budget.cost_usd"] for step in admitted] == [0.03, 0.035, 0.02]
    assert budget.ledger.spent_nano == 85_000_000 and budget.ledger.held_nano == 0


def test_the_input_estimate_is_the_last_completed_model_calls_input_any_model() -> None:
    spans = capture()
    cheap = Price(input=1, output=1)
    with run(spans, usd=1, tokens=100_000) as budget:
        first = budget.step("model", "small", max_output_tokens=100, price=cheap)
        assert first.held_usd == pytest.approx(100e-6)  # no call yet: the input estimate is 0
        with first:
            first.record_usage(input_tokens=4000, cache_read=1000, output_tokens=80)
        with budget.step("model", "big", max_output_tokens=100, price=cheap) as second:
            # 4,000 input (cache included) + 100 output, from the other model's last call
            assert second.held_usd == pytest.approx(4100e-6)
            second.record_usage(input_tokens=6000, output_tokens=90)
        given = budget.step("model", "big", max_output_tokens=100, price=cheap,
                            input_tokens=10)
        assert given.held_usd == pytest.approx(110e-6)  # the caller's input_tokens win
        with given:
            pass
        tool = budget.step("tool", "search")
        with tool:
            pass
    stamped = by_name(spans, "big")
    assert stamped[0]["budget.remaining_tokens"] == 100_000 - 4080
    assert by_name(spans, "search")[0]["budget.remaining_tokens"] == 100_000 - 4080 - 6090 - 110
    assert "budget.remaining_usd" in by_name(spans, "search")[0]


def test_a_token_budget_allocates_output_after_the_input_and_refuses_by_tokens() -> None:
    spans = capture()
    with run(spans, tokens=10_000) as budget:
        with budget.step("model", "m", max_output_tokens=4000, input_tokens=3000) as call:
            call.record_usage(input_tokens=3000, output_tokens=4000)
        with budget.step("model", "m", max_output_tokens=4000, minimum_output_tokens=0,
                         input_tokens=1000) as call:
            assert call.max_tokens == 2000  # 3,000 left − 1,000 input
            call.record_usage(input_tokens=1000, output_tokens=1500)
        with pytest.raises(BudgetExhausted, match="tokens left") as refused:
            budget.step("model", "m", max_output_tokens=4000, input_tokens=300)
        assert refused.value.refused_by == "tokens"
    (refusal,) = [s for s in spans.steps() if s.get("budget.outcome") == "refused"]
    assert (refusal["budget.refused_by"], refusal["budget.remaining_tokens"]) == ("tokens", 500)
    assert "budget.remaining_usd" not in refusal
    assert spans.run().attributes["budget.run.exhausted_by"] == "tokens"
    assert spans.run().attributes["budget.run.outcome"] == "partial"  # the refusal was caught


def test_the_default_minimum_is_256_output_tokens_and_landing_spends_the_reserve() -> None:
    spans = capture()
    # $0.0120 left beyond a $0.01 reserve after a $0.008 call: 0.012 / $10 per Mtok = 1,200
    # output tokens; then 200 (refused: below 256); the landing may spend the reserve.
    with run(spans, usd=0.03, reserve_usd=0.01) as budget:
        with budget.step("model", "m", max_output_tokens=5000, price=GPT) as call:
            assert call.max_tokens == 2000
            call.record_usage(input_tokens=0, output_tokens=800)
        with budget.step("model", "m", max_output_tokens=5000, price=GPT) as call:
            assert call.max_tokens == 1200  # input estimate 0: the last call read nothing
            call.record_usage(input_tokens=0, output_tokens=1000)
        with pytest.raises(BudgetExhausted):
            budget.step("model", "m", max_output_tokens=5000, price=GPT)  # 200 fit
        with budget.step("model", "m", max_output_tokens=64, price=GPT) as small:
            assert small.max_tokens == 64  # the default minimum never exceeds the cap
            small.record_usage(input_tokens=0, output_tokens=64)
        with budget.step("model", "m", max_output_tokens=5000, price=GPT,
                         landing=True) as land:
            assert land.max_tokens == (30_000_000 - 18_640_000) // 10_000  # 1,136
            land.record_usage(input_tokens=0, output_tokens=1136)
        budget.finish("a short answer", missing=["the details"])
    assert spans.run().attributes["budget.run.outcome"] == "partial"
    assert spans.run().attributes["budget.run.exhausted_by"] == "usd"


def test_usd_zero_refuses_every_model_step_with_a_clear_outcome_and_tools_still_run() -> None:
    spans = capture()
    with run(spans, usd=0) as budget:
        for options in ({}, {"price": GPT, "max_output_tokens": 100},
                        {"estimate_usd": 0.001}):
            with pytest.raises(BudgetExhausted, match=r"\$0 of the dollar budget"):
                budget.step("model", "m", **options)
        with budget.step("tool", "search"):
            pass
    steps = spans.steps()
    assert [s["budget.outcome"] for s in steps if s["budget.step.kind"] == "model"] == [
        "refused"] * 3
    assert all(s["budget.refused_by"] == "usd" for s in steps if "budget.outcome" in s)
    assert by_name(spans, "search")[0]["budget.remaining_usd"] == 0.0
    run_span = spans.run().attributes
    assert (run_span["budget.run.outcome"], run_span["budget.run.exhausted_by"]) == (
        "partial", "usd")


def test_a_model_step_with_neither_price_nor_estimate_holds_nothing_and_counts_its_record(
        ) -> None:
    spans = capture()
    with run(spans, usd=0.01, tokens=1000) as budget:
        other = budget.step("model", "priced", max_output_tokens=100, price=GPT)
        with budget.step("model", "unpriced") as call:
            assert call.held_usd == 0 and call.max_tokens == 1000 - 100  # tokens still bound it
            call.record_usage(input_tokens=300, output_tokens=200, cost_usd=0.004)
        with other:
            other.record_usage(input_tokens=0, output_tokens=100)
        with budget.step("model", "unknown-cost") as call:
            call.record_usage(input_tokens=10, output_tokens=20)  # no price, no cost given
    assert budget.ledger.spent_nano == 4_000_000 + 1_000_000
    assert budget.ledger.spent_tokens == 500 + 100 + 30
    unpriced, priced, unknown = spans.steps()
    assert unpriced["budget.cost_usd"] == 0.004 and priced["budget.cost_usd"] == 0.001
    assert "budget.cost_usd" not in unknown  # unknown is not 0
    assert unknown["gen_ai.usage.input_tokens"] == 10


def test_an_estimate_without_a_price_is_held_whole_or_refused() -> None:
    spans = capture()
    with run(spans, usd=0.01) as budget:
        first = budget.step("model", "m", estimate_usd=0.006, max_output_tokens=1000)
        assert first.held_usd == 0.006 and first.max_tokens == 1000
        with pytest.raises(BudgetExhausted, match=r"estimate is \$0.006"):
            budget.step("model", "m", estimate_usd=0.006)
        with first:
            pass  # nothing recorded, answered: its estimate is taken as spent
        tool = budget.step("tool", "paid_search", estimate_usd=0.003)
        with tool:
            tool.record_usage(cost_usd=0.001)
    assert budget.ledger.spent_nano == 7_000_000


def test_a_call_without_max_output_tokens_holds_all_that_is_left_while_it_runs() -> None:
    spans = capture()
    with run(spans, usd=0.05, tokens=100_000) as budget:
        with budget.step("model", "m", price=GPT, input_tokens=1000) as call:
            assert call.max_tokens == (50_000_000 - 2_500_000) // 10_000  # all the money buys
            assert call.held_usd == 0.05
            with pytest.raises(BudgetExhausted):
                budget.step("model", "m", price=GPT, max_output_tokens=100)
        # it recorded nothing: only its input is an estimate of what it cost, not the rest
        assert (budget.ledger.spent_nano, budget.ledger.spent_tokens) == (2_500_000, 1000)
        with budget.step("model", "unpriced") as call:
            # no completed call reported an input: the input estimate is 0
            assert call.max_tokens == budget.ledger.held_tokens == 100_000 - 1000
        assert budget.ledger.spent_tokens == 1000  # and nothing recorded, nothing estimated


# -- recording usage -----------------------------------------------------------------------------
def test_record_usage_writes_the_opentelemetry_names_and_the_cost_exactly() -> None:
    spans = capture()
    claude = Price(input=3, output=15, cache_read=0.3, cache_write=3.75)
    with run(spans) as budget, budget.step("model", "claude", price=claude) as call:
        call.record_usage(input_tokens=12_345, cache_read=10_000, cache_write=1_000,
                          output_tokens=678, reasoning=100)
        call.record_usage(input_tokens=1, output_tokens=1)  # a second response adds up
    (step,) = spans.steps()
    assert {key: value for key, value in step.items() if key.startswith("gen_ai.usage")} == {
        "gen_ai.usage.input_tokens": 12_346, "gen_ai.usage.output_tokens": 679,
        "gen_ai.usage.cache_read.input_tokens": 10_000,
        "gen_ai.usage.cache_write.input_tokens": 1_000,
        "gen_ai.usage.reasoning.output_tokens": 100}
    # 1,345 fresh × $3 + 10,000 × $0.3 + 1,000 × $3.75 + 678 × $15, per million, then 1 + 15
    assert step["budget.cost_usd"] == 0.020973  # (4035 + 3000 + 3750 + 10170 + 3 + 15) µ$


def test_each_recorded_cost_is_rounded_half_to_even_to_the_nano_dollar() -> None:
    spans = capture()
    odd = Price(input=0.0015, output=0.0025)  # 1.5 and 2.5 nano-dollars per token
    with run(spans) as budget, budget.step("model", "m", price=odd) as call:
        call.record_usage(input_tokens=1, output_tokens=0)  # 1.5 → 2
        call.record_usage(input_tokens=0, output_tokens=1)  # 2.5 → 2
        call.record_usage(input_tokens=3, output_tokens=0)  # 4.5 → 4
    assert spans.steps()[0]["budget.cost_usd"] == 8e-9


@pytest.mark.parametrize("bad", ["12", 12.0, True, -1, math.nan, math.inf, 10**13, None,
                                 [1], {"n": 1}])
def test_usage_that_is_not_a_non_negative_integer_records_nothing_and_never_raises(
        bad: object) -> None:
    spans = capture()
    with run(spans, usd=1) as budget, budget.step("model", "m", price=GPT) as call:
        call.record_usage(input_tokens=bad, output_tokens=7, cache_read=bad,  # type: ignore
                          cache_write=bad, reasoning=bad, cost_usd=bad)  # type: ignore
    (step,) = spans.steps()
    assert {key: value for key, value in step.items() if key.startswith("gen_ai.usage")} == {
        "gen_ai.usage.output_tokens": 7}
    assert step["budget.cost_usd"] == 7e-5


def test_a_cost_given_by_the_caller_is_kept_only_when_it_is_a_finite_non_negative_number(
        ) -> None:
    spans = capture()
    with run(spans) as budget:
        for cost in (0.25, -1, math.nan, "0.1", True):
            with budget.step("model", "m") as call:
                call.record_usage(output_tokens=1, cost_usd=cost)  # type: ignore[arg-type]
    costs = [step.get("budget.cost_usd") for step in spans.steps()]
    assert costs == [0.25, None, None, None, None]


def test_usage_recorded_after_the_step_ended_still_counts_in_the_ledger() -> None:
    spans = capture()
    with run(spans, usd=1) as budget:
        call = budget.step("model", "m", price=GPT, max_output_tokens=100)
        with call:
            pass  # answered, nothing recorded yet: its estimate is counted
        assert budget.ledger.spent_nano == 1_000_000
        call.record_usage(input_tokens=0, output_tokens=10)  # the body read after the block
        assert budget.ledger.spent_nano == 100_000  # the actual replaces the estimate


# -- nesting, the ladder, the outcome ----------------------------------------------------------
def test_nested_budgets_clamp_money_and_tokens_and_spend_from_the_enclosing_run() -> None:
    spans = capture()
    with run(spans, usd=0.10, tokens=50_000, reserve_usd=0.02) as outer:
        with outer.step("model", "m", price=GPT) as call:
            call.record_usage(input_tokens=0, output_tokens=5000)  # $0.05 spent
        with RunBudget(30, usd=1.0, tokens=1_000_000, agent="helper",
                       reserve_usd=0.1) as inner:
            # $0.03 spendable outside the outer reserve: the inner $1 becomes $0.03, its
            # reserve scaled with it; its tokens 45,000.
            assert (inner.ledger.total_nano, inner.ledger.reserve_nano) == (30_000_000, 3_000_000)
            assert inner.ledger.total_tokens == 45_000
            with inner.step("model", "m", price=GPT, max_output_tokens=10_000) as call:
                assert call.max_tokens == 2700
                call.record_usage(input_tokens=0, output_tokens=2000)
        # a budget with no dimension of its own spends the outer's
        with RunBudget(30, agent="plain") as plain, \
                plain.step("model", "m", price=GPT, max_output_tokens=10_000) as call:
            assert call.max_tokens == 1000  # $0.10 − $0.07 spent − the outer's $0.02 reserve
            call.record_usage(input_tokens=0, output_tokens=1000)
        child = outer.child(share=0.5)
        with child, pytest.raises(BudgetExhausted):
            child.step("model", "m", price=GPT, max_output_tokens=10_000)
    assert outer.ledger.spent_nano == 50_000_000 + 20_000_000 + 10_000_000
    assert outer.ledger.spent_tokens == 5000 + 2000 + 1000


def test_the_ladder_moves_on_whichever_budget_is_nearest_its_end() -> None:
    spans = capture()
    with run(spans, 100, usd=1.0, reserve_usd=0.1) as budget:
        with budget.step("model", "m", price=Price(input=0, output=100)) as call:
            call.record_usage(output_tokens=6500)  # $0.65: 65% of the money, 0% of the time
        assert budget.phase == "narrowing" and not budget.may_widen()
        with pytest.raises(BudgetExhausted, match="no new branches") as refused:
            budget.step("subagent", "explore", widening=True)
        assert refused.value.refused_by == "usd"
        assert "$0.35 of $1 left ($0.1 of it kept for the final answer)" in budget.describe()
        with budget.step("model", "m", price=Price(input=0, output=100)) as call:
            call.record_usage(output_tokens=2500)  # $0.90: only the reserve is left
        assert budget.phase == "landing" and budget.ran_out()
    assert by_name(spans, "explore")[0]["budget.refused_by"] == "usd"
    events = [dict(event.attributes) for event in spans.run().events]
    assert [(e["budget.phase"], e.get("budget.phase.by")) for e in events] == [
        ("narrowing", "usd"), ("fit_only", "usd"), ("landing", "usd")]
    assert events[0]["budget.consumed_ratio"] == 0.65


def test_describe_tells_the_model_the_time_money_and_tokens_left() -> None:
    spans = capture()
    with run(spans, 60, reserve=6, usd=0.5, tokens=200_000, reserve_usd=0.02) as budget:
        budget.clock.advance(18.8)  # type: ignore[attr-defined]
        with budget.step("model", "m", price=GPT) as call:
            call.record_usage(input_tokens=40_000, output_tokens=8_800)
        assert budget.describe() == (
            "41.2 s of 60 s left (6 s of it kept for the final answer); $0.312 of $0.5 left "
            "($0.02 of it kept for the final answer); 151,200 of 200,000 tokens left; "
            "phase: open.")
    with run(capture(), 10) as plain:
        assert plain.describe() == "10.0 s of 10 s left (1 s of it kept for the final " \
                                   "answer); phase: open."


def test_a_refusal_that_leaves_the_run_makes_it_exhausted_by_usd() -> None:
    spans = capture()
    with pytest.raises(BudgetExhausted), run(spans, usd=0.001) as budget:
        budget.step("model", "m", price=GPT, max_output_tokens=1000)
    attributes = spans.run().attributes
    assert (attributes["budget.run.outcome"], attributes["budget.run.exhausted_by"]) == (
        "exhausted", "usd")


def test_a_step_refused_by_time_in_a_money_run_carries_what_money_was_left() -> None:
    spans = capture()
    with run(spans, 10, usd=0.5, tokens=1000) as budget:
        with pytest.raises(BudgetExhausted, match="ms left") as refused:
            budget.step("tool", "crawl", minimum=60)
        assert refused.value.refused_by == "time"
    (step,) = spans.steps()
    assert (step["budget.outcome"], step["budget.remaining_usd"],
            step["budget.remaining_tokens"]) == ("refused", 0.5, 1000)
    assert "budget.refused_by" not in step  # time, the default


def test_a_run_cut_by_time_says_nothing_of_money() -> None:
    spans = capture()
    with run(spans, 10, usd=1) as budget:
        budget.clock.advance(11)  # type: ignore[attr-defined]
    assert spans.run().attributes["budget.run.outcome"] == "exhausted"
    assert "budget.run.exhausted_by" not in spans.run().attributes


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "message"), [
    ({"input": -1, "output": 1}, "input rate"), ({"input": 1, "output": math.nan}, "output"),
    ({"input": 1, "output": 1, "cache_read": math.inf}, "cache_read"),
    ({"input": "1", "output": 1}, "input"), ({"input": True, "output": 1}, "input"),
    ({"input": 1, "output": 1, "cache_write": -0.5}, "cache_write")])
def test_a_price_with_a_bad_rate_is_refused_at_construction(options: dict,
                                                             message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Price(**options)


def test_price_is_keyword_only_and_a_missing_cache_rate_is_the_input_rate() -> None:
    with pytest.raises(TypeError):
        Price(1, 2)  # type: ignore[misc]
    price = Price(input=2, output=8)
    assert price == Price(input=2, output=8, cache_read=2, cache_write=2)
    assert price.cache_read_pico == price.input_pico == 2 * 10**12


@pytest.mark.parametrize(("options", "message"), [
    ({"usd": -1}, "usd"), ({"usd": math.nan}, "usd"), ({"usd": "1"}, "usd"),
    ({"tokens": -5}, "tokens"), ({"tokens": 1.5}, "tokens"), ({"tokens": True}, "tokens"),
    ({"usd": 1, "reserve_usd": 1}, "less than"), ({"reserve_usd": 0.1}, "give usd"),
    ({"usd": 1, "reserve_usd": -0.1}, "reserve_usd")])
def test_bad_money_arguments_to_a_run_are_value_errors_naming_them(options: dict,
                                                                   message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunBudget(10, **options)


def test_bad_money_arguments_to_a_step_are_value_errors_naming_them() -> None:
    with RunBudget(10, usd=1, clock=ManualClock()) as budget:
        for options, message in (({"max_output_tokens": 0}, "max_output_tokens"),
                                 ({"max_output_tokens": 100, "minimum_output_tokens": 200},
                                  "at most max_output_tokens"),
                                 ({"input_tokens": -1}, "input_tokens"),
                                 ({"estimate_usd": -0.1}, "estimate_usd"),
                                 ({"price": 2.5}, "Price")):
            with pytest.raises(ValueError, match=message):
                budget.step("model", "m", **options)
        assert budget.ledger.held_nano == 0


# -- many calls at once ------------------------------------------------------------------------
def _check_invariant(ledger: Ledger, seen: list[int]) -> None:
    with ledger.lock:
        seen.append(ledger.spent_nano + ledger.held_nano)


def test_64_threads_admitting_at_once_never_hold_and_spend_more_than_the_budget() -> None:
    spans = capture()
    seen: list[int] = []
    refused: list[str] = []
    start = threading.Barrier(64)
    with RunBudget(60, usd=0.5, tokens=400_000, tracer=spans.tracer) as budget:
        def call(index: int) -> None:
            start.wait()
            try:
                step = budget.step("model", "m", price=GPT, max_output_tokens=2000,
                                   input_tokens=1000 + index, minimum_output_tokens=100)
            except BudgetExhausted as error:
                refused.append(error.refused_by)
                return
            with step:
                _check_invariant(budget.ledger, seen)
                # what the provider bills: the input estimated, the output allocated
                step.record_usage(input_tokens=1000 + index, output_tokens=step.max_tokens)
                _check_invariant(budget.ledger, seen)

        with ThreadPoolExecutor(64) as pool:
            list(pool.map(call, range(64)))
    assert refused and all(by in ("usd", "tokens") for by in refused)
    assert max(seen) <= 500_000_000
    assert budget.ledger.spent_nano <= 500_000_000 and budget.ledger.held_nano == 0
    assert budget.ledger.spent_tokens <= 400_000
    assert len(spans.steps()) == 64


def test_64_tasks_admitting_at_once_never_hold_and_spend_more_than_the_budget() -> None:
    spans = capture()
    seen: list[int] = []

    async def main() -> RunBudget:
        async with RunBudget(60, usd=0.2, tokens=150_000, tracer=spans.tracer) as budget:
            async def call(index: int) -> str:
                await asyncio.sleep(0)
                try:
                    step = budget.step("model", "m", price=GPT, max_output_tokens=3000,
                                       input_tokens=500)
                except BudgetExhausted as error:
                    return error.refused_by
                async with step:
                    _check_invariant(budget.ledger, seen)
                    await asyncio.sleep(0.001 * (index % 5))  # in flight together
                    step.record_usage(input_tokens=500, output_tokens=step.max_tokens)
                    _check_invariant(budget.ledger, seen)
                return "ok"

            outcomes = await asyncio.gather(*(call(index) for index in range(64)))
        assert "ok" in outcomes and set(outcomes) - {"ok"} <= {"usd", "tokens"}
        return budget

    budget = asyncio.run(main())
    assert max(seen) <= 200_000_000
    assert budget.ledger.spent_nano <= 200_000_000 and budget.ledger.held_nano == 0
    assert budget.ledger.spent_tokens <= 150_000
