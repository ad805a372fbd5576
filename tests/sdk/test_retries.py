"""Retries as proxies and the articles do them, judged by what the servers saw: Retry-After
honoured (and a retry declined when it does not fit), full jitter, a process-wide retry budget,
and a write whose effect is uncertain read back before anything re-sends it, against a
dependency that does not deduplicate."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from budgetscope_sdk import ManualClock, RetryBudget, RunBudget, Step, StepTimeout
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport, BudgetTransport

from tests.sdk.support.capture import capture
from tests.sdk.support.servers import (
    CommitThenDropProxy,
    LedgerService,
    LedgerState,
    ProxyState,
    ScriptedTool,
    ScriptState,
    serve,
)


def declined(spans: Any) -> list[str]:
    return [e.attributes["budget.retry.reason"] for e in spans.run().events
            if e.name == "budget.retry_declined"]


def test_a_retry_after_that_does_not_fit_declines_the_retry() -> None:
    spans = capture()
    script = ScriptState({"/quote": [(503, 0.0, {"Retry-After": "5"})]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(1, reserve=0.1, tracer=spans.tracer) as budget, \
            pytest.raises(httpx.HTTPStatusError):
        budget.retry(budget.intent("quote"),
                     lambda call: client.get(f"{url}/quote").raise_for_status(),
                     side_effect="read", attempts=3, backoff=0.05)
    assert script.calls["/quote"] == 1  # the server was asked once, not three times
    (reason,) = declined(spans)
    assert reason.startswith("Retry-After 5000 ms and attempt 2's minimum do not fit")
    assert [s["budget.step.kind"] for s in spans.steps()] == ["tool"]


@pytest.mark.slow
def test_a_retry_after_that_fits_is_waited_for() -> None:
    spans = capture()
    script = ScriptState({"/quote": [(503, 0.0, {"Retry-After": "1"}), (200, 0.0)]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        answer = budget.retry(budget.intent("quote"),
                              lambda call: client.get(f"{url}/quote").raise_for_status().json(),
                              side_effect="read", backoff=0.01)
    assert answer == {"path": "/quote", "turn": 2}
    first, second = script.arrivals["/quote"]
    assert second - first >= 1.0  # the server's own clock: it was left alone for a second
    backoff = [s for s in spans.steps() if s["budget.step.kind"] == "backoff"]
    assert [s["budget.allocated_ms"] for s in backoff] == [1000]


def test_backoff_is_full_jitter_below_the_exponential_ceiling() -> None:
    spans, clock = capture(), ManualClock()
    with RunBudget(100, reserve=1, tracer=spans.tracer, clock=clock) as budget:

        def fail(call: Step) -> None:
            clock.advance(0.01)
            raise StepTimeout("late", deadline_ms=call.allocated_ms)

        with pytest.raises(StepTimeout):
            budget.retry(budget.intent("lookup"), fail, side_effect="read", attempts=5,
                         backoff=1.0, factor=2.0)
    waits = [s["budget.allocated_ms"] for s in spans.steps() if s["budget.step.kind"] == "backoff"]
    ceilings = [1000, 2000, 4000, 8000]
    assert len(waits) <= 4 and all(w <= c for w, c in zip(waits, ceilings, strict=False))
    assert any(w < c for w, c in zip(waits, ceilings, strict=False))  # drawn, not the ceiling


def test_the_process_retry_budget_bounds_retries_across_runs() -> None:
    clock = ManualClock()
    shared = RetryBudget(ratio=0.1, min_per_second=0.0, window=10.0, clock=clock)
    spans = capture()
    attempts: list[str] = []

    def flaky(call: Step) -> str:
        attempts.append(call.name)
        if call.name == "down":
            raise StepTimeout("late", deadline_ms=call.allocated_ms)
        return "ok"

    for index in range(10):  # ten requests earn one retry
        with RunBudget(10, tracer=spans.tracer, clock=clock, retry_budget=shared) as budget:
            budget.retry(budget.intent("up", index), flaky, name="up", side_effect="read")
    with RunBudget(10, tracer=spans.tracer, clock=clock, retry_budget=shared) as budget, \
            pytest.raises(StepTimeout):
        budget.retry(budget.intent("down"), flaky, name="down", side_effect="read",
                     attempts=5, jitter=False, backoff=0.01)
    assert attempts.count("down") == 2  # the first attempt and the one retry the budget had
    assert shared.snapshot() == (11, 1)
    runs = [s for s in spans.spans() if "budget.total_ms" in (s.attributes or {})]
    reasons = [e.attributes["budget.retry.reason"] for e in runs[-1].events
               if e.name == "budget.retry_declined"]
    assert reasons == ["the process's retry budget is spent"]
    clock.advance(10.5)  # the window moved on: the floor alone (0 here) and no requests
    assert shared.try_retry() is False


def test_a_timed_out_write_is_read_back_not_re_sent_to_a_server_that_does_not_dedupe() -> None:
    spans = capture()
    ledger = LedgerState(dedupe=False)
    with serve(LedgerService, ledger) as (dependency, _), \
            serve(CommitThenDropProxy, ProxyState(dependency)) as (proxy_url, proxy), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        intent = budget.intent("cancel_subscription", "sub_42")

        def cancel(call: Step) -> dict[str, Any]:
            return client.post(f"{proxy_url}/subscriptions/sub_42/cancel").raise_for_status().json()

        def read_back(call: Step) -> dict[str, Any] | None:
            found = client.get(f"{dependency}/operations/{intent.key}")
            return found.json() if found.status_code == 200 else None

        answer = budget.retry(intent, cancel, reconcile=read_back, cap=0.4, backoff=0.05)
        assert proxy.client_closed_after_drop.wait(10)
    assert ledger.posts == 1 and ledger.executions == ["/subscriptions/sub_42/cancel"]
    assert answer["execution"] == 1  # what the read-back found, returned as the result
    kinds = [(s["budget.step.kind"], s.get("budget.outcome"), s.get("budget.reconcile.result"))
             for s in spans.steps()]
    assert kinds == [("tool", "client_timeout", None), ("reconcile", "ok", "landed")]


@pytest.mark.slow
def test_a_write_that_did_not_land_is_re_sent_with_its_key() -> None:
    spans = capture()
    ledger = LedgerState(dedupe=False, hang_first=1)  # the first request is lost before work
    with serve(LedgerService, ledger) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        intent = budget.intent("cancel_subscription", "sub_7")

        def read_back(call: Step) -> dict[str, Any] | None:
            found = client.get(f"{url}/operations/{intent.key}")
            return found.json() if found.status_code == 200 else None

        answer = budget.retry(
            intent, lambda call: client.post(f"{url}/cancel").raise_for_status().json(),
            reconcile=read_back, cap=0.3, backoff=0.05)
    assert ledger.posts == 2 and len(ledger.executions) == 1
    assert ledger.seen_keys == [intent.key]  # the re-send carried the intent's key
    assert answer["execution"] == 1
    kinds = [(s["budget.step.kind"], s.get("budget.reconcile.result")) for s in spans.steps()]
    assert [k for k, _ in kinds] == ["tool", "reconcile", "backoff", "tool"] or \
        [k for k, _ in kinds] == ["tool", "reconcile", "tool"]  # a jittered wait under 1 ms
    assert kinds[1] == ("reconcile", "not_landed")


@pytest.mark.slow
def test_without_a_read_back_an_uncertain_write_is_not_re_sent() -> None:
    spans = capture()
    ledger = LedgerState(dedupe=False)
    with serve(LedgerService, ledger) as (dependency, _), \
            serve(CommitThenDropProxy, ProxyState(dependency)) as (proxy_url, proxy), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
            pytest.raises(httpx.ReadTimeout):
        budget.retry(budget.intent("refund", "r1"),
                     lambda call: client.post(f"{proxy_url}/refund").raise_for_status(),
                     cap=0.3)
    assert proxy.client_closed_after_drop.wait(10)
    assert ledger.posts == 1  # one request reached the dependency; nothing re-sent blind
    (reason,) = declined(spans)
    assert reason.startswith("the write may have taken effect")


def test_a_rate_limited_write_was_not_acted_on_and_is_retried() -> None:
    spans = capture()
    script = ScriptState({"/send": [(429, 0.0, {"Retry-After": "0"}), (200, 0.0)]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        answer = budget.retry(budget.intent("send_email", "welcome"),
                              lambda call: client.post(f"{url}/send").raise_for_status().json(),
                              backoff=0.01)
    assert answer == {"path": "/send", "turn": 2}
    effects = [s.get("budget.effect_status") for s in spans.steps()
               if s["budget.step.kind"] == "tool"]
    assert effects == ["none", "completed"]


def test_aretry_reads_back_an_uncertain_write() -> None:
    spans = capture()
    ledger = LedgerState(dedupe=False)

    async def agent(proxy_url: str, dependency: str) -> dict[str, Any]:
        async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
                RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
            intent = budget.intent("cancel_subscription", "sub_9")

            async def cancel(call: Step) -> dict[str, Any]:
                response = await client.post(f"{proxy_url}/cancel")
                return response.raise_for_status().json()  # type: ignore[no-any-return]

            async def read_back(call: Step) -> dict[str, Any] | None:
                found = await client.get(f"{dependency}/operations/{intent.key}")
                return found.json() if found.status_code == 200 else None

            return await budget.aretry(intent, cancel, reconcile=read_back, cap=0.3)

    with serve(LedgerService, ledger) as (dependency, _), \
            serve(CommitThenDropProxy, ProxyState(dependency)) as (proxy_url, _):
        answer = asyncio.run(agent(proxy_url, dependency))
    assert ledger.posts == 1 and answer["execution"] == 1
    assert [s["budget.step.kind"] for s in spans.steps()] == ["tool", "reconcile"]
