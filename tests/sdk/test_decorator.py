"""@budgeted_tool: sync and async functions whose every call is a step of the current run, with
its slice, its refusal, our timeout as a TimedOut result, and a write's key from its
arguments; outside any run the function is called as written."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from budgetscope_sdk import (
    BudgetExhausted,
    ManualClock,
    RunBudget,
    TimedOut,
    budgeted_tool,
    current_step,
)
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport, BudgetTransport

from tests.sdk.support.capture import capture
from tests.sdk.support.servers import HangingTool, HangState, ScriptedTool, ScriptState, serve


def test_an_async_tool_is_cancelled_at_its_slice_and_answers_timed_out() -> None:
    spans = capture()
    script = ScriptState({"/report": [(200, 0.0)]})

    async def agent(url: str, hang: str) -> tuple[object, object]:
        async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client:

            @budgeted_tool("tool", "fetch_report", cap=0.3)
            async def fetch_report(path: str) -> str:
                return (await client.get(f"{path}/report")).text

            async with RunBudget(10, reserve=1, tracer=spans.tracer):
                return await fetch_report(url), await fetch_report(hang)

    with serve(ScriptedTool, script) as (url, _), serve(HangingTool, HangState()) as (hang, _):
        fine, late = asyncio.run(agent(url, hang))
    assert fine == '{"path": "/report", "turn": 1}'
    assert isinstance(late, TimedOut) and late.deadline_ms == 300
    assert [(s["budget.step.name"], s["budget.allocated_ms"], s.get("budget.outcome"))
            for s in spans.steps()] == [("fetch_report", 300, "ok"),
                                        ("fetch_report", 300, "client_timeout")]


def test_a_sync_tool_is_bounded_inline_or_abandoned_in_a_thread() -> None:
    spans = capture()
    release = threading.Event()

    @budgeted_tool(cap=0.2)
    def lookup(client: httpx.Client, url: str) -> str:
        return client.get(f"{url}/lookup").text

    @budgeted_tool(cap=0.2, thread=True)
    def legacy() -> str:
        release.wait(10)
        return "late"

    with serve(HangingTool, HangState()) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer):
        inline = lookup(client, url)
        threaded = legacy()
    release.set()
    assert isinstance(inline, TimedOut) and isinstance(threaded, TimedOut)
    assert [(s["budget.step.name"], s["budget.outcome"]) for s in spans.steps()] == [
        ("lookup", "client_timeout"), ("legacy", "client_timeout")]


def test_a_write_tool_s_key_is_its_arguments_and_reaches_the_function() -> None:
    spans = capture()
    keys: list[str | None] = []

    @budgeted_tool("tool", "cancel_subscription", side_effect="write", cap=1)
    def cancel(sub_id: str) -> str:
        step = current_step()
        keys.append(step.idempotency_key if step else None)
        return "cancelled"

    with RunBudget(10, tracer=spans.tracer, clock=ManualClock()):
        assert [cancel("sub_1"), cancel("sub_1"), cancel(sub_id="sub_2")] == ["cancelled"] * 3
    assert keys[0] == keys[1] != keys[2]
    attempts = [(s["budget.attempt"], s["budget.idempotency_key"]) for s in spans.steps()]
    assert attempts == [(1, keys[0]), (2, keys[0]), (1, keys[2])]


def test_refused_when_its_minimum_does_not_fit_and_plain_outside_a_run() -> None:
    calls: list[str] = []

    @budgeted_tool("tool", "crawl", minimum=60)
    def crawl(site: str) -> str:
        calls.append(site)
        return "crawled"

    assert crawl("outside") == "crawled"  # no run: called as written
    with RunBudget(10, tracer=capture().tracer, clock=ManualClock()), \
            pytest.raises(BudgetExhausted, match="refused tool:crawl"):
        crawl("inside")
    assert calls == ["outside"]
