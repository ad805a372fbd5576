"""A step records what the SDK saw, not only what escaped its block: timeouts are results the
agent handles (the articles' own style), and a handled timeout or 503 is still a client give-up
or an upstream failure. Where the SDK saw nothing it writes no outcome, so budgetscope decides
from the spans below exactly as for a plain OpenTelemetry tool span. Each span is also stored
through the real ingest, with and without budget.outcome, and budgetscope derives the class the
fake servers' behaviour calls for."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from budgetscope_sdk import (
    ManualClock,
    RunBudget,
    StepTimeout,
    TimedOut,
    current_step,
)
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport, BudgetTransport
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from tests.sdk.support.capture import capture
from tests.sdk.support.servers import HangingTool, HangState, ScriptedTool, ScriptState, serve
from tests.support.trace_builder import open_db, store


def without_outcome(span: ReadableSpan) -> ReadableSpan:
    attributes = {k: v for k, v in (span.attributes or {}).items() if k != "budget.outcome"}
    return ReadableSpan(name=span.name, context=span.context, parent=span.parent,
                        resource=span.resource, attributes=attributes, events=span.events,
                        links=span.links, kind=span.kind, status=span.status,
                        start_time=span.start_time, end_time=span.end_time,
                        instrumentation_scope=span.instrumentation_scope)


def derived(tmp_path: Path, spans: list[ReadableSpan], name: str) -> dict[str, tuple]:
    """step name -> (class, effect is uncertain) as budgetscope derives them."""
    con = open_db(tmp_path, f"{name}.duckdb")
    try:
        store(con, spans)
        return {row[0]: (row[1], row[2]) for row in con.execute(
            "SELECT name, class, is_uncertain FROM steps").fetchall()}
    finally:
        con.close()


@pytest.mark.slow
def test_timeouts_handled_inside_steps_are_client_timeouts_and_writes_stay_uncertain(
        tmp_path: Path) -> None:
    """Three ways an agent keeps a timeout as a result; the server saw each request arrive."""
    spans = capture()
    results: dict[str, object] = {}

    async def agent(url: str) -> None:
        async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
                RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
            # 1. call.run cancels the call; the agent returns the honest result.
            intent = budget.intent("cancel_subscription", "sub_1")
            async with intent.attempt(cap=0.2) as call:
                try:
                    await call.run(client.post(f"{url}/cancel"))
                except StepTimeout:
                    results["run"] = call.timed_out()
            # 2. The transport's own deadline, caught as httpx's timeout.
            async with budget.intent("send_email", "x").attempt(cap=0.2) as call:
                try:
                    await client.post(f"{url}/send")
                except httpx.TimeoutException:
                    results["transport"] = call.timed_out()
            # 3. The agent's own timer (not the SDK's): asking for the envelope records it.
            async with budget.step("tool", "search", side_effect="read", cap=5) as call:
                try:
                    await asyncio.wait_for(client.get(f"{url}/search"), 0.2)
                except TimeoutError:
                    results["own"] = call.timed_out()

    with serve(HangingTool, HangState()) as (url, hang):
        asyncio.run(agent(url))
        assert hang.received.is_set()
    assert all(isinstance(r, TimedOut) and r.side_effect_status == "possible"
               for r in results.values()), results
    steps = {s["budget.step.name"]: s for s in spans.steps()}
    assert {name: (s["budget.outcome"], s.get("budget.effect_status"))
            for name, s in steps.items()} == {
        "cancel_subscription": ("client_timeout", "possible"),
        "send_email": ("client_timeout", "possible"), "search": ("client_timeout", None)}
    assert steps["cancel_subscription"]["error.type"] == "budgetscope_sdk.errors.StepTimeout"
    sent = spans.spans()
    expected = {"cancel_subscription": ("client_timeout", True),
                "send_email": ("client_timeout", True), "search": ("client_timeout", False)}
    assert derived(tmp_path, sent, "as_sent") == expected
    # The span carries its own evidence (error.type, an exception event): a reader that
    # ignores budget.outcome derives the same classes.
    assert derived(tmp_path, [without_outcome(s) for s in sent], "stripped") == expected


@pytest.mark.slow
def test_a_handled_503_is_an_upstream_error_as_under_a_plain_opentelemetry_tool_span(
        tmp_path: Path) -> None:
    spans = capture()
    script = ScriptState({"/quote": [(503, 0.0)]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        with budget.step("tool", "quote_sdk", cap=2):
            sdk_answer = client.get(f"{url}/quote").status_code
        # The same call by a tool span of plain OpenTelemetry around an HTTP client span.
        with spans.tracer.start_as_current_span("execute_tool quote_plain", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "quote_plain"}), \
                spans.tracer.start_as_current_span("GET", kind=SpanKind.CLIENT, attributes={
                    "http.request.method": "GET", "url.full": f"{url}/quote"}) as http:
            plain_answer = client.get(f"{url}/quote").status_code
            http.set_attribute("http.response.status_code", plain_answer)
    assert sdk_answer == plain_answer == 503 and script.calls["/quote"] == 2
    found = derived(tmp_path, spans.spans(), "both")
    assert found["quote_sdk"][0] == found["quote_plain"][0] == "upstream_error"
    stripped = derived(tmp_path, [without_outcome(s) for s in spans.spans()], "stripped")
    assert stripped["quote_sdk"][0] == "upstream_error"


def test_a_step_that_saw_nothing_leaves_the_class_to_the_spans_below(tmp_path: Path) -> None:
    """An HTTP call made by a client the SDK does not see (here a plain OpenTelemetry client
    span with a 503): the SDK writes no outcome, and budgetscope rolls the 503 up."""
    spans = capture()
    with RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        with budget.step("tool", "lookup", cap=2), spans.tracer.start_as_current_span(
                "GET", kind=SpanKind.CLIENT, attributes={
                    "http.request.method": "GET", "server.address": "billing",
                    "http.response.status_code": 503}):
            pass  # the agent's own client handled the 503
        with budget.step("tool", "quiet", cap=2):
            pass
    steps = {s["budget.step.name"]: s for s in spans.steps()}
    assert "budget.outcome" not in steps["lookup"] and "budget.outcome" not in steps["quiet"]
    found = derived(tmp_path, spans.spans(), "below")
    assert (found["lookup"][0], found["quiet"][0]) == ("upstream_error", "ok")


def test_a_generic_error_after_a_handled_503_gives_way_to_the_503() -> None:
    spans = capture()
    script = ScriptState({"/quote": [(503, 0.0)]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
            pytest.raises(ValueError), budget.step("tool", "quote", cap=2):
        if client.get(f"{url}/quote").status_code != 200:
            raise ValueError("no quote")
    (step,) = spans.steps()
    assert (step["budget.outcome"], step["error.type"], step["http.response.status_code"]) == (
        "upstream_error", "ValueError", 503)


def test_the_agent_s_own_word_wins() -> None:
    spans = capture()
    script = ScriptState({"/quote": [(503, 0.0)]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget, \
            budget.step("tool", "quote", cap=2) as call:
        client.get(f"{url}/quote")
        call.set_outcome("client_error")
    (step,) = spans.steps()
    assert step["budget.outcome"] == "client_error" and "http.response.status_code" not in step


def test_check_raises_and_records_even_when_caught() -> None:
    spans, clock = capture(), ManualClock()
    with RunBudget(10, reserve=1, tracer=spans.tracer, clock=clock) as budget, \
            budget.step("tool", "crawl", cap=1) as call:
        clock.advance(1)
        with pytest.raises(StepTimeout):
            call.check()
    (step,) = spans.steps()
    assert step["budget.outcome"] == "client_timeout"


def test_run_sync_waits_no_longer_than_the_slice_and_the_thread_sees_the_step() -> None:
    spans = capture()
    release = threading.Event()
    seen: list[object] = []

    def blocking() -> str:
        seen.append(current_step())
        release.wait(10)
        return "late"

    with RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        with budget.step("tool", "legacy", cap=0.2) as call, \
                pytest.raises(StepTimeout, match="abandoned"):
            call.run_sync(blocking)
        assert seen == [call]  # the copied context carried the step into the thread
        with budget.step("tool", "quick", cap=2) as quick:
            assert quick.run_sync(lambda a, b: a + b, 2, b=3) == 5
    release.set()
    legacy, fine = spans.steps()
    assert legacy["budget.outcome"] == "client_timeout" and "budget.outcome" not in fine
    legacy_span = next(span for span in spans.spans() if span.name == "tool legacy")
    assert [e.name for e in legacy_span.events].count("budget.cleanup_abandoned") == 1


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_run_process_stops_the_whole_process_group_at_the_deadline() -> None:
    spans = capture()
    # A shell that starts a child and waits: killing the shell alone would orphan the sleep.
    script = "sleep 30 & echo $!; wait"
    with RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        with budget.step("tool", "migrate", cap=0.3) as call, \
                pytest.raises(StepTimeout) as raised:
            call.run_process(["sh", "-c", script])
        with budget.step("tool", "echo", cap=5) as call:
            done = call.run_process([sys.executable, "-c", "print('hi')"])
    child = int(raised.value.stdout.decode().split()[0])  # type: ignore[attr-defined]
    # The grandchild got the signal with its group: it is gone (reaped by init soon after).
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError(f"sleep {child} outlived its step's deadline")
    assert done.returncode == 0 and done.stdout == b"hi\n"
    migrate, echo = spans.steps()
    assert migrate["budget.outcome"] == "client_timeout" and migrate["budget.cleanup_ms"] >= 0
    assert "budget.outcome" not in echo
