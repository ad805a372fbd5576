"""The budget SDK's arithmetic on a manual clock: slices, refusals, the ladder, children and
nested budgets, run outcomes and what finish() says, attempts and keys, result shapes, bad input,
and its Python 3.9 syntax."""

from __future__ import annotations

import ast
import asyncio
import contextlib

import pytest
from budgetscope_sdk import (
    FIT_ONLY,
    LANDING,
    NARROWING,
    OPEN,
    BudgetExhausted,
    LatencyBook,
    ManualClock,
    RunBudget,
    StepTimeout,
    classify,
)
from opentelemetry import trace

from tests.sdk.support.capture import capture
from tests.support.paths import REPO

SDK = REPO / "sdk" / "budgetscope_sdk"


def budget_on(clock: ManualClock, spans, total: float = 100, **options) -> RunBudget:
    return RunBudget(total, tracer=spans.tracer, clock=clock, **options)


def test_run_span_carries_the_budget_and_its_deadline_from_the_wall_clock() -> None:
    spans, clock = capture(), ManualClock(start_unix_s=1_764_000_000.25)
    with budget_on(clock, spans, 30, reserve=3, agent="support-agent") as budget:
        assert budget.deadline_unix_ms == 1_764_000_030_250
        clock.advance(12)
    run = spans.run()
    assert dict(run.attributes) == {
        "budget.total_ms": 30000, "budget.deadline_unix_ms": 1_764_000_030_250,
        "budget.reserve_ms": 3000, "gen_ai.agent.name": "support-agent",
        "budget.run.outcome": "completed"}
    assert run.start_time == 1_764_000_000_250_000_000
    assert run.end_time - run.start_time == 12_000_000_000


def test_slice_is_min_of_cap_and_remaining_minus_reserve() -> None:
    spans, clock = capture(), ManualClock()
    caps = {"tool:fetch_report": 9, "search": 4}
    with budget_on(clock, spans, 18, reserve=2, per_step_caps=caps) as budget:
        assert budget.slice(cap=9) == 9
        clock.advance(10)  # 8 left, 6 beyond the reserve
        assert budget.slice(cap=9) == 6
        with budget.step("tool", "fetch_report") as call:
            assert call.timeout == 6
        with budget.step("tool", "search") as call:
            assert call.timeout == 4  # a cap by bare name
        with budget.step("model", "gpt", landing=True) as call:
            assert call.timeout == 8  # the landing may spend the reserve
    fetch, search, land = spans.steps()
    assert (fetch["budget.remaining_ms"], fetch["budget.cap_ms"],
            fetch["budget.allocated_ms"]) == (8000, 9000, 6000)
    assert (search["budget.cap_ms"], search["budget.allocated_ms"]) == (4000, 4000)
    assert "budget.cap_ms" not in land and land["budget.allocated_ms"] == 8000


def test_ladder_phases_are_queryable_and_each_change_is_a_run_span_event() -> None:
    spans, clock = capture(), ManualClock()
    book = LatencyBook(min_samples=3)
    with budget_on(clock, spans, 100, reserve=10, latencies=book) as budget:
        for _ in range(3):
            with budget.step("tool", "slow"):
                clock.advance(5)  # p95 5 s
        assert budget.phase == OPEN and budget.may_widen()
        clock.advance(46)  # 61 s spent
        assert budget.phase == NARROWING and not budget.may_widen()
        with pytest.raises(BudgetExhausted, match="no new branches"):
            budget.step("subagent", "explore", widening=True)
        with budget.step("tool", "slow"):  # still admitted: not a widening call
            clock.advance(5)
        clock.advance(15)  # 81 s spent: 19 left, 9 beyond the reserve
        assert budget.phase == FIT_ONLY
        with budget.step("tool", "slow"):  # p95 5 s fits in 9 s
            clock.advance(5)
        clock.advance(1)  # 87 s: 3 beyond the reserve, p95 5 s does not fit
        with pytest.raises(BudgetExhausted, match="p95 5000 ms does not fit in 3000 ms"):
            budget.step("tool", "slow")
        with budget.step("tool", "unseen") as call:  # no history: admitted on its slice
            assert call.timeout == pytest.approx(3)
        clock.advance(3)
        assert budget.phase == LANDING
        budget.finish("summary", done=["accounts"], missing=["vendor lookup"])
    run = spans.run()
    events = [(e.attributes["budget.phase"], (e.timestamp - run.start_time) / 1e9)
              for e in run.events]
    assert events == [(NARROWING, 60.0), (FIT_ONLY, 80.0), (LANDING, 90.0)]
    assert run.attributes["budget.run.outcome"] == "partial"
    assert "not included: vendor lookup" in run.attributes["budget.partial.reason"]
    refused = [s for s in spans.steps() if s.get("budget.outcome") == "refused"]
    assert [s["budget.step.name"] for s in refused] == ["explore", "slow"]


def test_child_budget_is_a_slice_whose_deadline_is_never_past_the_parents() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 60, reserve=6) as parent:
        clock.advance(30)  # 30 left, 24 spendable
        with parent.child(share=0.5, name="researcher") as child:
            assert child.total_s == 12
            with child.step("model", "gpt") as call:
                assert call.timeout == 12
                clock.advance(2)
        with parent.child(duration=600, name="greedy") as greedy:
            assert greedy.total_s == pytest.approx(22)  # asked for 10 minutes, got the rest
            assert greedy.deadline_unix_ms <= parent.deadline_unix_ms - 6000
    steps = spans.steps()
    researcher = next(s for s in steps if s["budget.step.name"] == "researcher")
    assert researcher["budget.step.kind"] == "subagent"
    assert researcher["budget.allocated_ms"] == 12000
    model_span = next(s for s in spans.spans() if s.name == "model gpt")
    researcher_span = next(s for s in spans.spans() if s.name == "subagent researcher")
    assert model_span.parent.span_id == researcher_span.context.span_id
    assert all("budget.total_ms" not in s for s in steps)  # subagents are steps, not runs


@pytest.mark.parametrize(("body", "outcome"), [
    ("pass", "completed"),
    ("raise_exhausted", "exhausted"),
    ("overrun", "exhausted"),
    ("fail", "failed"),
    ("cancel", "cancelled"),
])
def test_run_outcome_follows_what_happened(body: str, outcome: str) -> None:
    spans, clock = capture(), ManualClock()

    async def run() -> None:
        async with budget_on(clock, spans, 10, reserve=1) as budget:
            if body == "raise_exhausted":
                clock.advance(9.5)
                budget.slice(minimum=1)
            elif body == "overrun":
                clock.advance(11)
            elif body == "fail":
                raise ValueError("bad plan")
            elif body == "cancel":
                raise asyncio.CancelledError()

    with contextlib.suppress(BudgetExhausted, ValueError, asyncio.CancelledError):
        asyncio.run(run())
    assert spans.run().attributes["budget.run.outcome"] == outcome


def test_decorates_the_current_span_instead_of_opening_one() -> None:
    spans = capture()
    with spans.tracer.start_as_current_span("framework root") as root:
        with RunBudget(5, tracer=spans.tracer, decorate_current=True) as budget, \
                budget.step("tool", "t"):
            pass
        assert trace.get_current_span() is root
    assert spans.run().name == "framework root"
    (step_span,) = [s for s in spans.spans() if s.name == "tool t"]
    assert step_span.parent.span_id == root.get_span_context().span_id


def test_step_outcome_is_classified_from_what_was_raised() -> None:
    class HTTPStatusError(Exception):
        def __init__(self, status: int) -> None:
            super().__init__(f"status {status}")
            self.response = type("Response", (), {"status_code": status})()

    class ReadTimeout(Exception):
        pass

    assert classify(None) == "ok"
    assert classify(StepTimeout("ours", deadline_ms=5)) == "client_timeout"
    assert classify(TimeoutError()) == "client_timeout"
    assert classify(ReadTimeout("timed out")) == "client_timeout"
    assert classify(BudgetExhausted("no")) == "refused"
    assert classify(asyncio.CancelledError()) == "cancelled"
    assert classify(HTTPStatusError(503)) == "upstream_error"
    assert classify(HTTPStatusError(504)) == "upstream_error"  # their gateway gave up
    assert classify(HTTPStatusError(429)) == "upstream_error"
    assert classify(HTTPStatusError(404)) == "client_error"
    assert classify(ConnectionRefusedError()) == "upstream_error"
    assert classify(RuntimeError("Error code: 503 - The server is overloaded")) == "upstream_error"
    assert classify(ValueError("bad plan")) == "error"


def test_intent_key_is_minted_once_and_attempts_are_numbered() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 10, intent_namespace="run-1") as budget:
        intent = budget.intent("cancel_subscription", "sub_42")
        assert budget.intent("cancel_subscription", "sub_42") is intent
        assert budget.intent("cancel_subscription", "sub_43").key != intent.key
        for _ in range(2):
            with pytest.raises(StepTimeout), intent.attempt() as call:
                raise StepTimeout("late", deadline_ms=call.allocated_ms)
        result = intent.timed_out()
        assert (result.attempt, result.side_effect_status, result.retryable) == (2, "possible",
                                                                                 True)
        assert intent.reconcile(lambda call: True).result == "landed"
        assert intent.timed_out().side_effect_status == "completed"
        assert intent.timed_out().retryable is False
    with budget_on(ManualClock(), capture(), 10, intent_namespace="run-2") as other:
        assert other.intent("cancel_subscription", "sub_42").key != intent.key
    attempts = [s for s in spans.steps() if s["budget.step.kind"] == "tool"]
    assert [s["budget.attempt"] for s in attempts] == [1, 2]
    reconcile = spans.steps()[-1]
    assert (reconcile["budget.step.kind"], reconcile["budget.reconcile.result"],
            reconcile["budget.idempotency_key"]) == ("reconcile", "landed", intent.key)


def test_retry_declines_a_backoff_that_would_not_fit() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 2, reserve=0.5) as budget:
        intent = budget.intent("lookup", "x")

        def attempt(call):
            clock.advance(call.timeout)
            raise StepTimeout("late", deadline_ms=call.allocated_ms)

        with pytest.raises(StepTimeout):
            budget.retry(intent, attempt, side_effect="read", cap=1.2, backoff=0.5,
                         jitter=False, attempts=3)
    kinds = [(s["budget.step.kind"], s.get("budget.attempt")) for s in spans.steps()]
    assert kinds == [("tool", 1)]  # 0.3 s spendable after it: the 0.5 s backoff was declined
    (declined,) = [e for e in spans.run().events if e.name == "budget.retry_declined"]
    assert declined.attributes["budget.attempt"] == 2
    assert declined.attributes["budget.retry.reason"] == (
        "a 500 ms backoff and attempt 2's minimum do not fit in the 300 ms left")


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="reserve"):
        RunBudget(5, reserve=5)
    with pytest.raises(ValueError, match="total must be a finite, non-negative"):
        RunBudget(-1)
    spans = capture()
    with budget_on(ManualClock(), spans, 5) as budget:
        with pytest.raises(ValueError, match="unknown step kind 'llm'"):
            budget.step("llm", "gpt")
        with pytest.raises(ValueError, match="side_effect must be 'read' or 'write'"):
            budget.step("tool", "t", side_effect="delete")
    with pytest.raises(RuntimeError, match="context manager"):
        RunBudget(5).slice()


def test_sdk_sources_are_python_3_9_syntax() -> None:
    for path in sorted(SDK.rglob("*.py")):
        source = path.read_text()
        tree = ast.parse(source, filename=str(path), feature_version=(3, 9))
        # `X | Y` is only safe at runtime on 3.10+: every module defers its annotations.
        assert "from __future__ import annotations" in source or not any(
            isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr)
            for node in ast.walk(tree)), path
    assert (SDK / "py.typed").exists()


# -- budgets that nest --------------------------------------------------------------------------
def test_a_run_budget_opened_inside_a_run_is_a_clamped_subagent_step_of_it() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 10, reserve=1, agent="planner") as outer:
        clock.advance(7)  # 3 s left, 2 s beyond the reserve
        # A library that opens its own ten-second budget, knowing nothing of ours.
        with RunBudget(10, reserve=1, agent="researcher") as inner:
            assert inner.total_s == pytest.approx(2)  # clamped to what the run may spend
            assert inner.reserve_s == pytest.approx(0.2)  # the reserve keeps its share
            assert inner.deadline_unix_ms <= outer.deadline_unix_ms - 1000
            with inner.step("tool", "search", cap=9) as call:
                assert call.timeout == pytest.approx(1.8)  # not 9 s with 2 s left
                clock.advance(1)
    runs = [s for s in spans.spans() if "budget.total_ms" in (s.attributes or {})]
    assert [r.name for r in runs] == ["agent run"]  # one run, not two
    researcher = next(s for s in spans.spans() if s.name == "subagent researcher")
    assert (researcher.attributes["budget.step.kind"], researcher.attributes["budget.allocated_ms"],
            researcher.attributes["gen_ai.agent.name"]) == ("subagent", 2000, "researcher")
    search = next(s for s in spans.spans() if s.name == "tool search")
    assert search.parent.span_id == researcher.context.span_id
    assert search.context.trace_id == runs[0].context.trace_id


def test_a_nested_budget_with_nothing_left_to_spend_is_refused() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 10, reserve=1):
        clock.advance(9.5)
        with pytest.raises(BudgetExhausted, match="refused subagent:agent run"), RunBudget(5):
            raise AssertionError("never entered")
    assert spans.run().attributes["budget.run.outcome"] == "partial"


def test_a_separate_run_asked_for_is_its_own_trace_linked_to_where_it_started() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 10, reserve=1) as outer, \
            outer.step("tool", "schedule", cap=5) as call, \
            RunBudget(600, separate_run=True, tracer=spans.tracer, clock=clock,
                      name="nightly export") as job:
        assert job.total_s == 600  # its own deadline, not the caller's
    runs = {s.name: s for s in spans.spans() if "budget.total_ms" in (s.attributes or {})}
    assert set(runs) == {"agent run", "nightly export"}
    job_span = runs["nightly export"]
    assert job_span.parent is None
    assert job_span.context.trace_id != runs["agent run"].context.trace_id
    (link,) = job_span.links
    assert link.context.span_id == call.span.get_span_context().span_id


# -- what finish() says ---------------------------------------------------------------------
def test_finish_calls_a_failure_a_failure_not_an_exhausted_budget() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 30, reserve=3) as budget:
        with pytest.raises(RuntimeError), budget.step("tool", "fetch_report", cap=9):
            clock.advance(0.001)
            raise RuntimeError("Error code: 503 - The server is overloaded")
        result = budget.finish("no report", missing=["report"])
    assert (result.outcome, result.partial) == ("failed", False)
    assert result.note == ("failed after 1 steps: tool:fetch_report upstream_error; "
                           "not included: report")
    run = spans.run()
    assert run.attributes["budget.run.outcome"] == "failed"
    assert run.attributes["budget.failure.reason"] == result.note
    assert "budget.partial.reason" not in run.attributes


def test_finish_is_partial_when_the_budget_ran_out() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 10, reserve=1) as budget:
        with budget.step("tool", "fetch_report", cap=9):
            clock.advance(8.5)
        with pytest.raises(BudgetExhausted):
            budget.step("model", "summarise", minimum=1)
        result = budget.finish("report", done=["report"], missing=["summary"])
    assert (result.outcome, result.partial) == ("partial", True)
    assert result.note == ("budget exhausted after 2 steps; complete: report; "
                           "not included: summary")
    assert spans.run().attributes["budget.run.outcome"] == "partial"
    with budget_on(ManualClock(), capture(), 10) as told:
        assert told.finish(1, missing=["x"], exhausted=True).outcome == "partial"
    with budget_on(ManualClock(), capture(), 10) as complete:
        assert complete.finish(1).outcome == "completed"


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("total", [0, -1, float("nan"), float("inf"), float("-inf"), "soon"])
def test_a_budget_that_is_no_deadline_is_a_clear_error(total: object) -> None:
    with pytest.raises(ValueError, match="total must be|more than 0 seconds"):
        RunBudget(total)  # type: ignore[arg-type]


@pytest.mark.parametrize("option", [{"reserve": float("nan")}, {"reserve": float("inf")},
                                    {"per_step_caps": {"tool:x": float("inf")}}])
def test_durations_must_be_finite(option: dict) -> None:
    with pytest.raises(ValueError, match="finite"):
        RunBudget(10, **option)


def test_a_step_after_its_run_closed_is_refused_not_given_a_deadline() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 10) as budget:
        admitted = budget.step("tool", "late_entry", cap=1)
    assert budget.ended
    with pytest.raises(BudgetExhausted, match="its run has ended"):
        budget.step("tool", "fetch_report", cap=1)
    with pytest.raises(BudgetExhausted, match="its run has ended"):
        budget.slice(cap=1)
    with pytest.raises(BudgetExhausted, match="its run has ended"), admitted:
        raise AssertionError("never entered")
    assert [s.name for s in spans.spans()] == ["agent run"]  # nothing recorded after it


def test_finish_names_only_the_failures_nothing_made_good() -> None:
    spans, clock = capture(), ManualClock()
    with budget_on(clock, spans, 30, reserve=3) as budget:
        flaky = budget.intent("quote", "eur")
        with pytest.raises(StepTimeout), flaky.attempt(side_effect="read", cap=1):
            raise StepTimeout("late", deadline_ms=1000)
        with flaky.attempt(side_effect="read", cap=1) as call:
            call.set_outcome("ok")  # the retry made the first attempt good
        refund = budget.intent("refund", "order_1")
        with pytest.raises(StepTimeout), refund.attempt(cap=1):
            raise StepTimeout("late", deadline_ms=1000)
        assert refund.reconcile(lambda call: True).result == "landed"  # it landed after all
        with pytest.raises(RuntimeError), budget.step("tool", "fetch_report", cap=1):
            raise RuntimeError("Error code: 503")
        result = budget.finish("partial answer", missing=["report"])
    assert result.note == ("failed after 5 steps: tool:fetch_report upstream_error; "
                           "not included: report")
