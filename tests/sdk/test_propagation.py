"""Deadline propagation from the receiving side: what a caller sends is untrusted input that
never raises and never gives an unbounded deadline, and a service spends its caller's deadline
on its own downstream calls (RunBudget.from_remote), as part of the caller's run."""

from __future__ import annotations

import httpx
import pytest
from budgetscope_sdk import (
    DEADLINE_HEADER,
    REMAINING_HEADER,
    BudgetExhausted,
    ManualClock,
    RemoteDeadline,
    RunBudget,
    grpc_timeout_header,
)
from budgetscope_sdk.httpx_transport import BudgetTransport
from hypothesis import given
from hypothesis import strategies as st

from tests.sdk.support.capture import capture
from tests.sdk.support.servers import ScriptedTool, ScriptState, serve


def test_deadline_propagation_forms() -> None:
    assert grpc_timeout_header(1.5) == "1500000u"
    assert grpc_timeout_header(0.0004) == "400000n"
    assert grpc_timeout_header(250) == "250000m"
    clock = ManualClock()
    remote = RemoteDeadline.from_headers({"deadline-remaining-ms": "1500"}, clock)
    assert remote is not None and remote.remaining() == 1.5
    assert (remote.source, remote.problem) == (REMAINING_HEADER, None)
    clock.advance(1.4)
    assert not remote.expired() and remote.expired(margin=0.2)
    epoch = RemoteDeadline.from_headers({DEADLINE_HEADER: str(clock.wall_ns() // 10**6 + 800)},
                                        clock)
    assert epoch is not None and epoch.remaining() == pytest.approx(0.8)
    past = RemoteDeadline.from_headers({DEADLINE_HEADER: "1000"}, clock)
    assert past is not None and past.remaining() == 0  # a deadline already passed: 0 s left
    assert RemoteDeadline.from_headers({}, clock) is None
    spans = capture()
    with RunBudget(10, tracer=spans.tracer, clock=clock) as budget, \
            budget.step("tool", "t", cap=2) as call:
        clock.advance(0.5)
        assert call.headers()[REMAINING_HEADER] == "1500"
        assert call.grpc_metadata() == [("grpc-timeout", "1500000u")]
        assert call.grpc_timeout() == 1.5


@pytest.mark.parametrize(("value", "problem"), [
    ("inf", "is not finite"), ("1e400", "is not finite"), ("Infinity", "is not finite"),
    ("nan", "is not finite"), ("-5", "is negative"), ("soon", "is not a number"),
    ("", "is not a number"), ("12ms", "is not a number"),
])
def test_bad_deadline_headers_fall_back_to_the_default_and_say_why(value: str,
                                                                   problem: str) -> None:
    clock = ManualClock()
    remote = RemoteDeadline.from_headers({REMAINING_HEADER: value}, clock, default_s=5)
    assert remote is not None and remote.remaining() == 5
    assert remote.source == "default" and problem in (remote.problem or "")
    capped = RemoteDeadline.from_headers({REMAINING_HEADER: value}, clock, max_s=30)
    assert capped is not None and (capped.remaining(), capped.source) == (30, "maximum")
    assert RemoteDeadline.from_headers({REMAINING_HEADER: value}, clock) is None


def test_an_oversized_deadline_is_cut_to_the_maximum() -> None:
    clock = ManualClock()
    huge = RemoteDeadline.from_headers({REMAINING_HEADER: "9" * 40}, clock, max_s=60)
    assert huge is not None and (huge.remaining(), huge.source) == (60, "maximum")
    assert "above the maximum of 60 s" in (huge.problem or "")
    # No maximum named: a day, never unbounded.
    unnamed = RemoteDeadline.from_headers({DEADLINE_HEADER: "9" * 30}, clock)
    assert unnamed is not None and unnamed.remaining() == 86_400


@given(st.dictionaries(st.sampled_from([REMAINING_HEADER, DEADLINE_HEADER, "deadline-epoch-ms",
                                        "X-Other"]), st.text(max_size=50)))
def test_from_headers_never_raises_and_is_always_bounded(headers: dict[str, str]) -> None:
    remote = RemoteDeadline.from_headers(headers, ManualClock(), default_s=5, max_s=60)
    assert remote is not None and 0 <= remote.remaining() <= 60


def test_a_service_spends_its_caller_s_deadline_on_its_own_calls() -> None:
    spans = capture()
    downstream = ScriptState({"/rates": [(200, 0.0)]})
    # The request as it arrived: the caller had 800 ms left; no trace context with it.
    with serve(ScriptedTool, downstream) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget.from_remote({"deadline-remaining-ms": "800"}, default=30,
                                  tracer=spans.tracer, agent="pricing") as budget, \
            budget.step("tool", "rates", cap=5) as call:
        assert call.timeout <= 0.72  # what the caller left, less the 10% reserve
        client.get(f"{url}/rates")
    sent = downstream.headers["/rates"][0]
    assert 0 < int(sent[REMAINING_HEADER]) <= 720  # the caller's deadline went on downstream
    run = spans.run()  # no trace was going on: the service's budget is a run of its own
    assert run.attributes["budget.total_ms"] <= 800
    assert run.attributes["budget.remote.source"] == REMAINING_HEADER


def test_inside_the_caller_s_trace_the_service_s_budget_is_part_of_the_caller_s_run() -> None:
    spans = capture()
    with spans.tracer.start_as_current_span("POST /quote"), \
            RunBudget.from_remote({"deadline-remaining-ms": "Infinity"}, default=2,
                                  tracer=spans.tracer) as budget, \
            budget.step("tool", "rates", cap=5) as call:
        assert call.timeout == pytest.approx(1.8, abs=0.01)  # the default, less the reserve
    assert not [s for s in spans.spans() if "budget.total_ms" in (s.attributes or {})]
    wrapper = next(s for s in spans.spans() if s.name == "agent run")
    assert wrapper.attributes["budget.remote.source"] == "default"
    assert "is not finite" in wrapper.attributes["budget.remote.problem"]
    assert "budget.run.outcome" not in wrapper.attributes


def test_a_caller_whose_deadline_has_passed_gets_every_step_refused() -> None:
    clock = ManualClock()
    spans = capture()
    past = str(clock.wall_ns() // 10**6 - 5)
    with RunBudget.from_remote({DEADLINE_HEADER: past}, default=30, reserve=5,
                               tracer=spans.tracer, clock=clock) as budget:
        with pytest.raises(BudgetExhausted):
            budget.step("tool", "rates", cap=5)
        assert budget.remaining() == 0
