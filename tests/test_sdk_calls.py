"""The budget SDK's calls against real servers on 127.0.0.1 (issue 16): the articles' own tests
— a hanging tool, a retry through a proxy that commits and drops the reply, a cooperative
handler, a refusal — plus cancellation cleanup and the httpx transport's propagation."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from budgetscope_sdk import (
    DEADLINE_HEADER,
    REMAINING_HEADER,
    BudgetExhausted,
    ManualClock,
    RunBudget,
    TimedOut,
    run_tool,
)
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport, BudgetTransport

from tests.sdk_servers import (
    CommitThenDropProxy,
    CooperativeExport,
    CountingTool,
    CountState,
    ExportState,
    HangingTool,
    HangState,
    LedgerService,
    LedgerState,
    ProxyState,
    serve,
)
from tests.sdk_support import capture


def test_hanging_tool_gets_an_honest_timed_out_result_and_no_open_transport() -> None:
    spans = capture()

    async def agent(url: str) -> object:
        async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
                RunBudget(5, reserve=0.5, tracer=spans.tracer) as budget:
            intent = budget.intent("export_customers", "q4")
            return await run_tool(
                budget, "export_customers",
                lambda call: client.post(f"{url}/export",
                                         headers={"Idempotency-Key": call.idempotency_key}),
                side_effect="write", intent=intent, cap=0.3)

    with serve(HangingTool, HangState()) as (url, state):
        result = asyncio.run(agent(url))
        # The client gave up and closed its connection: the server sees end-of-file.
        assert state.client_closed.wait(10), "the timed-out request's connection stayed open"
    assert isinstance(result, TimedOut)
    assert result.status == "timed_out"
    assert result.deadline_ms == 300  # the allocation, min(cap 300, 4500 spendable)
    assert result.side_effect_status == "possible"  # the request had reached the server
    assert result.idempotency_key and result.idempotency_key.startswith("export_customers-")
    assert result.retryable is True
    assert result.idempotency_key in result.hint
    assert json.loads(result.to_json())["status"] == "timed_out"
    assert state.headers["Idempotency-Key"] == result.idempotency_key
    assert int(state.headers[REMAINING_HEADER]) <= 300
    (step,) = spans.steps()
    assert step["budget.outcome"] == "client_timeout"
    assert step["budget.allocated_ms"] == 300
    assert step["budget.effect_status"] == "possible"
    assert step["budget.side_effect"] == "write"
    assert step["budget.attempt"] == 1
    assert spans.run().attributes["budget.run.outcome"] == "completed"


def test_retry_after_timeout_replays_with_the_same_key_and_executes_once() -> None:
    spans = capture()
    ledger = LedgerState()
    with serve(LedgerService, ledger) as (dependency, _), \
            serve(CommitThenDropProxy, ProxyState(dependency)) as (proxy_url, proxy), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        intent = budget.intent("cancel_subscription", "sub_42")

        def cancel(call):
            response = client.post(f"{proxy_url}/subscriptions/sub_42/cancel",
                                   headers={"Idempotency-Key": call.idempotency_key})
            response.raise_for_status()
            return response.json()

        answer = budget.retry(intent, cancel, cap=0.5, backoff=0.05)
        assert proxy.client_closed_after_drop.wait(10)
    assert proxy.dropped == 1 and proxy.forwarded == 2
    assert ledger.executions == ["/subscriptions/sub_42/cancel"]  # executed once
    assert ledger.seen_keys == [intent.key, intent.key]  # the replay carried the same key
    assert answer == {"status": "cancelled", "path": "/subscriptions/sub_42/cancel",
                      "execution": 1}
    first, backoff, second = spans.steps()
    assert (first["budget.step.kind"], first["budget.attempt"], first["budget.outcome"],
            first["budget.effect_status"]) == ("tool", 1, "client_timeout", "possible")
    assert (backoff["budget.step.kind"], backoff["budget.attempt"],
            backoff["budget.allocated_ms"]) == ("backoff", 2, 50)
    assert (second["budget.attempt"], second["budget.outcome"],
            second["budget.effect_status"]) == (2, "ok", "completed")
    assert {first["budget.idempotency_key"], second["budget.idempotency_key"]} == {intent.key}


def test_cooperative_handler_stops_at_its_deadline_and_records_its_cancellation() -> None:
    spans = capture()
    export = ExportState(batches=200, batch_seconds=0.02, margin=0.1)
    with serve(CooperativeExport, export) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
            budget.step("tool", "export_customers", side_effect="write", cap=0.6) as call:
        reply = client.post(f"{url}/export").json()
        if reply["status"] == "cancelled":
            call.set_outcome("cancelled")  # the tool stopped itself at our deadline
    # It answered before our own timeout fired (the reply arrived), having stopped early.
    assert reply["status"] == "cancelled"
    assert export.ledger == [reply]
    assert 0 < reply["completed_batches"] < reply["total_batches"] == 200
    assert export.written == reply["completed_batches"]  # nothing ran after the stop
    (step,) = spans.steps()
    assert step["budget.outcome"] == "cancelled"
    assert step["budget.effect_status"] == "possible"  # some batches were written
    assert step["budget.allocated_ms"] == 600


def test_call_with_less_than_its_minimum_left_is_refused_and_never_sent() -> None:
    spans = capture()
    clock = ManualClock()
    counter = CountState()
    with serve(CountingTool, counter) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer, clock=clock) as budget:
        clock.advance(8.5)  # 1.5 s left, 0.5 s beyond the reserve
        with pytest.raises(BudgetExhausted, match="refused tool:fetch_report"), \
                budget.step("tool", "fetch_report", minimum=1.0):
            client.get(f"{url}/report")
        assert counter.requests == 0
        # The transport refuses too once a step's slice is spent, before dialling.
        with budget.step("tool", "search", cap=0.2) as call:
            clock.advance(0.2)
            with pytest.raises(BudgetExhausted, match="not sent"):
                client.get(f"{url}/search")
            call.set_outcome("refused")
    assert counter.requests == 0
    refused, search = spans.steps()
    assert refused["budget.outcome"] == "refused"
    assert refused["budget.remaining_ms"] == 1500
    assert refused["budget.allocated_ms"] == 500
    assert search["budget.outcome"] == "refused"
    run = spans.run()
    assert run.attributes["budget.run.outcome"] == "partial"
    refused_span = next(s for s in spans.spans() if s.name == "tool fetch_report")
    assert refused_span.start_time == refused_span.end_time  # refused: it never started


def test_cancellation_cleanup_longer_than_the_wait_is_recorded() -> None:
    spans = capture()
    cleaned: list[bool] = []

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0.2)  # cleanup that outlives the deadline
            cleaned.append(True)

    async def agent() -> TimedOut | None:
        async with RunBudget(10, tracer=spans.tracer) as budget:
            return await run_tool(budget, "index_documents", lambda call: slow_to_stop(),
                                  cap=0.05)

    result = asyncio.run(agent())
    assert cleaned == [True]
    assert isinstance(result, TimedOut) and result.deadline_ms == 50
    (step,) = spans.steps()
    assert step["budget.outcome"] == "client_timeout"
    assert step["budget.cleanup_ms"] >= 150  # the 200 ms cleanup, measured after the wait


def test_transport_sets_deadline_headers_and_timeout_from_the_slice() -> None:
    spans = capture()
    clock = ManualClock(start_unix_s=1_764_000_000)
    with serve(HangingTool, HangState()) as (url, hang), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(20, reserve=2, tracer=spans.tracer, clock=clock) as budget:
        clock.advance(4)
        with pytest.raises(httpx.ReadTimeout), budget.step("tool", "lookup", cap=0.25):
            client.get(f"{url}/lookup")
        assert hang.received.is_set()
    assert hang.headers[DEADLINE_HEADER] == str(1_764_000_000_000 + 4000 + 250)
    assert hang.headers[REMAINING_HEADER] == "250"
    (step,) = spans.steps()
    assert step["budget.outcome"] == "client_timeout"
    assert step["error.type"] == "httpx.ReadTimeout"
