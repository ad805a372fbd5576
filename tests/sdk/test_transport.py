"""The httpx transports against real servers on 127.0.0.1: one total deadline per call however
the server trickles its answer (the keepalive that keeps a dead call alive), our timeout raised
as httpx's and ours at once, the step told what the transport saw (handled or not), the
Idempotency-Key sent, and a connection that never opened marking the write as never sent."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import httpx
import pytest
from budgetscope_sdk import (
    IDEMPOTENCY_HEADER,
    REMAINING_HEADER,
    RunBudget,
    StepTimeout,
    TimedOut,
    call_tool,
)
from budgetscope_sdk.httpx_transport import (
    AsyncBudgetTransport,
    BudgetTransport,
    request_hook,
    response_hook,
)

from tests.sdk.support.capture import capture
from tests.sdk.support.servers import (
    CountingTool,
    CountState,
    ScriptedTool,
    ScriptState,
    TrickleState,
    TrickleTool,
    serve,
)

SLICE = 0.5
# The server sends one byte every 100 ms for 3 s: each byte resets a per-read timeout, so only a
# deadline on the whole exchange ends the call at its slice (about 5 bytes in).
TRICKLE = {"interval": 0.1, "size": 30}


def _cut_short(state: TrickleState) -> None:
    assert state.finished.wait(10)
    (sent,) = state.sent
    # The client went away long before the 30th byte: not kept alive by the trickle. (About 5
    # bytes fit in the slice; the bound leaves room for a loaded machine.)
    assert sent < state.size // 2, state.sent


@pytest.mark.slow
@pytest.mark.parametrize("part", ["body", "headers"])
def test_sync_transport_ends_a_trickling_exchange_at_the_slice(part: str) -> None:
    spans = capture()
    state = TrickleState(**TRICKLE, part=part)
    with serve(TrickleTool, state) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        with pytest.raises(httpx.ReadTimeout) as raised, \
                budget.step("tool", "export", cap=SLICE):
            client.get(f"{url}/export")
        assert isinstance(raised.value, StepTimeout)  # ours, catchable either way
        _cut_short(state)
    (step,) = spans.steps()
    assert step["budget.outcome"] == "client_timeout"


@pytest.mark.slow
def test_call_tool_through_the_transport_ends_a_trickle_and_returns_timed_out() -> None:
    spans = capture()
    state = TrickleState(**TRICKLE)
    with serve(TrickleTool, state) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        result = call_tool(budget, "export", lambda call: client.get(f"{url}/export").text,
                           cap=SLICE)
        _cut_short(state)
    assert isinstance(result, TimedOut) and result.deadline_ms == 500
    (step,) = spans.steps()
    assert step["budget.outcome"] == "client_timeout"


@pytest.mark.slow
def test_async_transport_ends_a_trickle_without_call_run() -> None:
    spans = capture()
    state = TrickleState(**TRICKLE)

    async def agent(url: str) -> BaseException | None:
        async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
                RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
                budget.step("tool", "export", cap=SLICE):
            try:
                await client.get(f"{url}/export")
            except httpx.TimeoutException as error:
                return error  # handled: the step still records our timeout
        return None

    with serve(TrickleTool, state) as (url, _):
        error = asyncio.run(agent(url))
        _cut_short(state)
    assert isinstance(error, httpx.ReadTimeout) and isinstance(error, StepTimeout)
    (step,) = spans.steps()
    assert step["budget.outcome"] == "client_timeout"
    assert step["error.type"] == "budgetscope_sdk.httpx_transport.DeadlineReadTimeout"


def test_a_shorter_timeout_of_the_client_still_applies_and_is_not_ours() -> None:
    spans = capture()
    state = TrickleState(interval=0.5, size=4)
    with serve(TrickleTool, state) as (url, _), \
            httpx.Client(transport=BudgetTransport(), timeout=0.1) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
            pytest.raises(httpx.ReadTimeout) as raised, budget.step("tool", "export", cap=5):
        client.get(f"{url}/export")
    assert not isinstance(raised.value, StepTimeout)  # the client's own 100 ms per read
    (step,) = spans.steps()
    assert step["budget.outcome"] == "client_timeout"  # still a client-side give-up


def test_a_handled_503_is_an_upstream_error_with_its_status_and_retry_after() -> None:
    spans = capture()
    script = ScriptState({"/quote": [(503, 0.0, {"Retry-After": "7"})]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        with budget.step("tool", "quote", cap=2) as call:
            response = client.get(f"{url}/quote")
            answer = "unavailable" if response.status_code == 503 else response.text
        assert call.retry_after_s == 7.0
    assert answer == "unavailable"
    (step,) = spans.steps()
    assert step["budget.outcome"] == "upstream_error"
    assert step["http.response.status_code"] == 503


def test_the_last_response_decides_a_503_then_a_200_is_ok() -> None:
    spans = capture()
    script = ScriptState({"/quote": [(503, 0.0), (200, 0.0)]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
            budget.step("tool", "quote", cap=2):
        assert client.get(f"{url}/quote").status_code == 503
        assert client.get(f"{url}/quote").status_code == 200
    (step,) = spans.steps()
    assert step["budget.outcome"] == "ok" and "http.response.status_code" not in step


def test_write_effect_follows_what_the_transport_saw() -> None:
    spans = capture()
    script = ScriptState({"/ok": [(200, 0.0)], "/busy": [(429, 0.0)], "/broken": [(500, 0.0)],
                          "/state": [(200, 0.0)]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        for path in ("ok", "busy", "broken"):
            with budget.intent(path).attempt(cap=2):
                client.post(f"{url}/{path}")
        with budget.step("tool", "only_read", side_effect="write", cap=2):
            client.get(f"{url}/state")  # a GET's 2xx is no evidence the write happened
    effects = {s["budget.step.name"]: (s.get("budget.outcome"), s.get("budget.effect_status"))
               for s in spans.steps()}
    assert effects == {"ok": ("ok", "completed"), "busy": ("upstream_error", "none"),
                       "broken": ("upstream_error", "possible"), "only_read": ("ok", None)}


def test_idempotency_key_and_deadline_headers_are_sent() -> None:
    spans = capture()
    script = ScriptState({"/cancel": [(200, 0.0)]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        intent = budget.intent("cancel", "sub_1")
        with intent.attempt(cap=2) as call:
            assert call.headers()[IDEMPOTENCY_HEADER] == intent.key
            client.post(f"{url}/cancel")
        with intent.attempt(cap=2):  # a key the caller set itself is kept
            client.post(f"{url}/cancel", headers={IDEMPOTENCY_HEADER: "mine"})
    first, second = script.headers["/cancel"]
    assert first[IDEMPOTENCY_HEADER] == intent.key
    assert 0 < int(first[REMAINING_HEADER]) <= 2000
    assert second[IDEMPOTENCY_HEADER] == "mine"


def test_a_connection_never_made_leaves_the_write_never_sent() -> None:
    spans = capture()
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
            budget.intent("send").attempt(cap=2), \
            contextlib.suppress(httpx.ConnectError):  # handled: the step still knows
        client.post(f"http://127.0.0.1:{port}/send")
    (step,) = spans.steps()
    assert (step["budget.outcome"], step["budget.effect_status"]) == ("upstream_error", "none")


@pytest.mark.slow
def test_event_hooks_bound_a_client_built_elsewhere_and_record_its_responses() -> None:
    spans = capture()
    counter = CountState()
    script = ScriptState({"/down": [(502, 0.0)]})
    with serve(CountingTool, counter) as (url, _), serve(ScriptedTool, script) as (down, _), \
            httpx.Client(event_hooks={"request": [request_hook],
                                      "response": [response_hook]}) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        with budget.step("tool", "count", cap=1.5):
            response = client.get(f"{url}/count")
            sent = response.request
        with budget.step("tool", "down", cap=1.5):
            client.get(f"{down}/down")
    assert response.status_code == 200 and counter.requests == 1
    assert 0 < int(sent.headers[REMAINING_HEADER]) <= 1500
    assert all(0 < sent.extensions["timeout"][phase] <= 1.5
               for phase in ("connect", "read", "write", "pool"))
    count, failed = spans.steps()
    assert count["budget.outcome"] == "ok"
    assert (failed["budget.outcome"], failed["http.response.status_code"]) == (
        "upstream_error", 502)


def test_the_transports_reach_each_socket_operation_of_the_installed_httpx() -> None:
    """The total deadline rests on one reach into httpx's and httpcore's internals (their
    transport's pool and its network backend). Written for httpx 0.28-0.29 and httpcore 1.0: an
    upgrade that moves them fails here, loudly, instead of quietly bounding only each phase."""
    import httpcore

    versions = f"httpx {httpx.__version__}, httpcore {httpcore.__version__}"
    assert BudgetTransport().bounds_each_operation, versions
    assert AsyncBudgetTransport().bounds_each_operation, versions
    assert not BudgetTransport(httpx.MockTransport(lambda r: httpx.Response(200))) \
        .bounds_each_operation  # a transport of another kind keeps the per-phase bound


def test_a_write_that_could_not_connect_then_went_through_completed() -> None:
    spans = capture()
    script = ScriptState({"/send": [(200, 0.0)]})
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
            budget.intent("send").attempt(cap=2):
        with contextlib.suppress(httpx.ConnectError):
            client.post(f"http://127.0.0.1:{dead}/send")  # the primary is down
        client.post(f"{url}/send")  # the fallback took it
    (step,) = spans.steps()
    assert (step["budget.outcome"], step["budget.effect_status"]) == ("ok", "completed")
