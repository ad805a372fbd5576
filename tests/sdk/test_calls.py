"""The budget SDK's calls against real servers on 127.0.0.1: the articles' own tests — a hanging
tool, a retry through a proxy that commits and drops the reply, a cooperative handler, a
refusal — plus cancellation cleanup, gRPC deadlines, hedges and the httpx transport's
propagation."""

from __future__ import annotations

import asyncio
import json
import random

import httpx
import pytest
from budgetscope_sdk import (
    DEADLINE_HEADER,
    REMAINING_HEADER,
    BudgetExhausted,
    ManualClock,
    RunBudget,
    TimedOut,
    intents,
    run_tool,
)
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport, BudgetTransport

from tests.sdk.support.capture import capture
from tests.sdk.support.servers import (
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


@pytest.mark.slow
def test_retry_after_timeout_replays_with_the_same_key_and_executes_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A full-jitter draw under 1 ms records no backoff step (intents.backoff_step): 1 run in
    # 50 at this 50 ms ceiling, which CI met once. A seeded generator draws 16 ms.
    monkeypatch.setattr(intents, "_JITTER", random.Random(7))
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

        # The ledger deduplicates by Idempotency-Key, so re-sending with the same key is safe.
        answer = budget.retry(intent, cancel, cap=0.5, backoff=0.05, idempotent=True)
        assert proxy.client_closed_after_drop.wait(10)
    assert proxy.dropped == 1 and proxy.forwarded == 2
    assert ledger.executions == ["/subscriptions/sub_42/cancel"]  # executed once
    assert ledger.seen_keys == [intent.key, intent.key]  # the replay carried the same key
    assert answer == {"status": "cancelled", "path": "/subscriptions/sub_42/cancel",
                      "execution": 1}
    first, backoff, second = spans.steps()
    assert (first["budget.step.kind"], first["budget.attempt"], first["budget.outcome"],
            first["budget.effect_status"]) == ("tool", 1, "client_timeout", "possible")
    assert (backoff["budget.step.kind"], backoff["budget.attempt"]) == ("backoff", 2)
    assert 1 <= backoff["budget.allocated_ms"] <= 50  # full jitter: a draw below 50 ms
    # The second attempt's 2xx is the evidence that the write completed.
    assert (second["budget.attempt"], second["budget.outcome"],
            second["budget.effect_status"]) == (2, "ok", "completed")
    assert {first["budget.idempotency_key"], second["budget.idempotency_key"]} == {intent.key}


@pytest.mark.slow
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
    assert "budget.allocated_ms" not in refused  # it got no deadline to measure against
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
    # Our deadline ended it: httpx's ReadTimeout and our StepTimeout in one.
    assert step["error.type"] == "budgetscope_sdk.httpx_transport.DeadlineReadTimeout"


def test_grpc_call_gets_its_deadline_from_the_slice_and_its_timeout_is_ours() -> None:
    import threading
    from concurrent import futures

    import grpc

    seen: list[float] = []
    release = threading.Event()

    def lookup(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.append(context.time_remaining())
        if request == b"hang":
            release.wait(10)
        return b"ok"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler("tools.Lookup", {
        "Get": grpc.unary_unary_rpc_method_handler(lookup)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    spans = capture()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, \
                RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
            get = channel.unary_unary("/tools.Lookup/Get")
            with budget.step("tool", "lookup", cap=2) as call:
                assert get(b"fast", timeout=call.grpc_timeout()) == b"ok"
            with pytest.raises(grpc.RpcError) as raised, \
                    budget.step("tool", "lookup", cap=0.2) as call:
                get(b"hang", timeout=call.grpc_timeout())
            assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        release.set()
        server.stop(0)
    # The server saw our slice as its deadline (gRPC's wire form rounds it up by a little).
    assert 0 < seen[0] <= 2.01 and 0 < seen[1] <= 0.21
    fast, hung = spans.steps()
    assert "budget.outcome" not in fast  # the SDK does not see gRPC statuses: budgetscope decides
    assert hung["budget.outcome"] == "client_timeout"  # DEADLINE_EXCEEDED: our deadline fired


def test_event_hook_applies_the_slice_to_a_client_built_elsewhere() -> None:
    from budgetscope_sdk.httpx_transport import request_hook

    spans = capture()
    counter = CountState()
    with serve(CountingTool, counter) as (url, _), \
            httpx.Client(event_hooks={"request": [request_hook]}) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
            budget.step("tool", "count", cap=1.5):
        response = client.get(f"{url}/count")
        sent = response.request
    assert response.status_code == 200 and counter.requests == 1
    assert 0 < int(sent.headers[REMAINING_HEADER]) <= 1500
    assert all(0 < value <= 1.5 for value in sent.extensions["timeout"].values())


def test_hedged_read_wins_with_the_second_copy_and_cancels_the_first() -> None:
    from budgetscope_sdk import hedged_read

    from tests.sdk.support.servers import ScriptedTool, ScriptState

    spans = capture()
    script = ScriptState({"/quote": [(200, 3.0), (200, 0.01)]})  # the first call is the slow one

    async def agent(url: str) -> dict:
        async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
                RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
            async def quote(call):
                return (await client.get(f"{url}/quote")).json()

            return await hedged_read(budget, "quote", quote, after=0.1, cap=5)

    with serve(ScriptedTool, script) as (url, _):
        answer = asyncio.run(agent(url))
    assert answer == {"path": "/quote", "turn": 2}  # the hedge's answer
    assert script.calls["/quote"] == 2
    steps = sorted(spans.steps(), key=lambda s: s["budget.hedge"])
    assert [(s["budget.hedge"], s["budget.outcome"], s["budget.attempt"])
            for s in steps] == [(False, "cancelled", 1), (True, "ok", 1)]


def test_a_run_bounded_by_its_deadline_is_exhausted_and_its_cleanup_timed() -> None:
    spans = capture()

    async def stuck() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0.05)

    async def agent() -> None:
        async with RunBudget(0.3, reserve=0.1, tracer=spans.tracer) as budget:
            await budget.bound(stuck())

    with pytest.raises(TimeoutError, match="the run reached its deadline"):
        asyncio.run(agent())
    run = spans.run()
    assert run.attributes["budget.run.outcome"] == "exhausted"
    (cleanup,) = [event for event in run.events if event.name == "budget.cleanup"]
    assert cleanup.attributes["budget.cleanup_finished"] is True
    assert cleanup.attributes["budget.cleanup_ms"] >= 40


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["hangs", "down"])
def test_an_exporter_that_hangs_or_is_down_never_blocks_or_raises_in_the_agent(
        exporter: str) -> None:
    import socket

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    with serve(HangingTool, HangState()) as (hang_url, hang):
        if exporter == "hangs":
            endpoint = f"{hang_url}/v1/traces"
        else:
            with socket.socket() as probe:  # a port nobody listens on
                probe.bind(("127.0.0.1", 0))
                endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}/v1/traces"
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=endpoint, timeout=1), schedule_delay_millis=10))
        tracer = provider.get_tracer("agent")
        with RunBudget(30, reserve=1, tracer=tracer) as budget:
            with budget.step("tool", "first", cap=1):
                pass
            if exporter == "hangs":
                # An export is in flight and will not be answered: the agent goes on.
                assert hang.received.wait(10)
            for index in range(200):
                with budget.step("tool", f"call_{index % 5}", cap=1):
                    pass
            # The agent finished its run while the exporter was still stuck on its request.
            still_stuck = exporter == "down" or not hang.client_closed.is_set()
        assert still_stuck and budget.outcome == "completed"
        provider.shutdown()  # bounded by the exporter's own 1 s timeout
