"""The httpx transports read a model call's usage from the answer itself and fit the request to
the step's allocation, against real servers on 127.0.0.1: OpenAI-compatible chat completions
and Anthropic Messages (JSON and streamed), the Responses API's shapes, a failed call with and
without usage, compressed bodies, and answers whose usage is garbage (recorded as nothing,
never raised)."""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import httpx
import pytest
from budgetscope_sdk import ManualClock, Price, RunBudget
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport, BudgetTransport
from budgetscope_sdk.usage import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    StreamUsage,
    Usage,
    from_body,
)

from tests.sdk.support.capture import capture
from tests.sdk.support.servers import FakeModel, ModelState, ScriptedTool, ScriptState, serve

GPT = Price(input=2.5, output=10)
PRICES = {"fake-gpt": {"input": "2.5", "output": "10"},
          "fake-claude": {"input": "3", "output": "15", "cache_read": "0.3",
                          "cache_write": "3.75"}}


def usage_attributes(step: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in step.items()
            if key.startswith("gen_ai.usage") or key == "budget.cost_usd"}


def test_chat_completions_usage_is_recorded_and_a_larger_max_tokens_lowered() -> None:
    spans = capture()
    model = ModelState(None, usage=[{"input": 1200, "cache_read": 200, "output": 3000,
                                     "reasoning": 100}] * 3, prices=PRICES)
    with serve(FakeModel, model) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(60, usd=1, tracer=spans.tracer) as budget:
        for field, asked in (("max_tokens", 4000), ("max_completion_tokens", 4000),
                             ("max_tokens", 500)):
            with budget.step("model", "fake-gpt", max_output_tokens=800, price=GPT) as call:
                response = client.post(f"{url}/v1/chat/completions", json={
                    "model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}],
                    field: asked})
                assert response.status_code == 200 and call.usage is not None
    # what the server was asked: the allocation, unless the request asked for less
    assert [request.get("max_tokens", request.get("max_completion_tokens"))
            for request in model.requests] == [800, 800, 500]
    assert [bill["output"] for bill in model.billed] == [800, 800, 500]
    steps = spans.steps()
    assert usage_attributes(steps[0]) == {
        "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 800,
        "gen_ai.usage.cache_read.input_tokens": 200,
        "gen_ai.usage.reasoning.output_tokens": 100, "budget.cost_usd": 0.011}
    assert [round(step["budget.cost_usd"] * 1e9) for step in steps] == [
        bill["cost_nano"] for bill in model.billed]
    assert budget.ledger.spent_nano == sum(bill["cost_nano"] for bill in model.billed)


def test_a_chat_completions_stream_is_asked_for_its_usage_and_records_it() -> None:
    spans = capture()
    model = ModelState(None, usage=[{"input": 900, "output": 40}, {"input": 950, "output": 30}],
                       prices=PRICES)

    async def main() -> None:
        async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
                RunBudget(60, usd=1, tracer=spans.tracer) as budget:
            for options in (None, {"include_usage": False, "continuous_usage_stats": False}):
                body: dict[str, Any] = {"model": "fake-gpt", "messages": [], "stream": True}
                if options is not None:
                    body["stream_options"] = options
                async with budget.step("model", "fake-gpt", price=GPT) as call:
                    async with client.stream("POST", f"{url}/v1/chat/completions",
                                             json=body) as response:
                        events = [line async for line in response.aiter_lines() if line]
                    assert events[-1] == "data: [DONE]"
                    assert call.usage == Usage(950 if options else 900, 30 if options else 40,
                                               0, None, None)

    with serve(FakeModel, model) as (url, _):
        asyncio.run(main())
    sent = [request["stream_options"] for request in model.requests]
    assert sent == [{"include_usage": True},
                    {"include_usage": True, "continuous_usage_stats": False}]
    assert [step["gen_ai.usage.output_tokens"] for step in spans.steps()] == [40, 30]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_input_is_converted_to_include_its_cache(stream: bool) -> None:
    spans = capture()
    claude = Price(input=3, output=15, cache_read=0.3, cache_write=3.75)
    model = ModelState(None, usage=[{"input": 5000, "cache_read": 3000, "cache_write": 1000,
                                     "output": 2000}], prices=PRICES)
    with serve(FakeModel, model) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(60, usd=1, tracer=spans.tracer) as budget, \
            budget.step("model", "fake-claude", max_output_tokens=1024, price=claude):
        body = {"model": "fake-claude", "max_tokens": 4096, "stream": stream,
                "messages": [{"role": "user", "content": "hi"}]}
        with client.stream("POST", f"{url}/v1/messages", json=body) as response:
            response.read()
    assert model.requests[0]["max_tokens"] == 1024 and "stream_options" not in model.requests[0]
    (bill,) = model.billed
    (step,) = spans.steps()
    assert usage_attributes(step) == {
        "gen_ai.usage.input_tokens": 5000, "gen_ai.usage.output_tokens": 1024,
        "gen_ai.usage.cache_read.input_tokens": 3000,
        "gen_ai.usage.cache_write.input_tokens": 1000,
        "budget.cost_usd": bill["cost_nano"] / 1e9}
    # 1,000 fresh × 3 + 3,000 × 0.3 + 1,000 × 3.75 + 1,024 × 15, per million dollars
    assert bill["cost_nano"] == 3_000_000 + 900_000 + 3_750_000 + 15_360_000


def test_a_failed_call_that_returned_usage_records_it_and_a_503_without_records_none() -> None:
    spans = capture()
    model = ModelState(None, usage=[{"status": 500, "usage_on_error": True, "input": 700,
                                     "output": 0}, {"status": 503}, {"status": 429}],
                       prices=PRICES)
    with serve(FakeModel, model) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(60, usd=1, tracer=spans.tracer) as budget:
        for _ in range(3):
            with budget.step("model", "fake-gpt", max_output_tokens=100, price=GPT):
                client.post(f"{url}/v1/chat/completions", json={"model": "fake-gpt"})
    billed, unbilled_503, unbilled_429 = spans.steps()
    assert usage_attributes(billed) == {"gen_ai.usage.input_tokens": 700,
                                        "gen_ai.usage.output_tokens": 0,
                                        "gen_ai.usage.cache_read.input_tokens": 0,
                                        "budget.cost_usd": 0.00175}
    assert billed["budget.outcome"] == "upstream_error"
    assert usage_attributes(unbilled_503) == {} == usage_attributes(unbilled_429)
    # the failed calls without usage are presumed unbilled: nothing counted for them
    assert budget.ledger.spent_nano == 1_750_000 == model.billed[0]["cost_nano"]


HOSTILE = [
    {"prompt_tokens": "12", "completion_tokens": 7.0},
    {"prompt_tokens": True, "completion_tokens": -3},
    {"prompt_tokens": 1e400, "completion_tokens": float("nan")},
    {"prompt_tokens": 10**15, "completion_tokens": [1]},
    {"prompt_tokens": {"n": 1}, "completion_tokens": None,
     "prompt_tokens_details": "cached", "completion_tokens_details": [1]},
    "usage", [1, 2], None,
]


@pytest.mark.parametrize("usage", HOSTILE)
def test_usage_that_is_not_a_non_negative_integer_records_nothing_and_never_raises(
        usage: Any) -> None:
    spans = capture()
    raw = json.dumps({"usage": usage}).replace("Infinity", "1e400").encode()
    events = b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
    script = ScriptState({
        "/v1/chat/completions": [(200, 0.0, {"Content-Type": "application/json"}, raw),
                                 (200, 0.0, {"Content-Type": "text/event-stream"}, events)],
        "/v1/messages": [(200, 0.0, {"Content-Type": "application/json"}, json.dumps(
            {"usage": {"input_tokens": "5", "cache_read_input_tokens": -1,
                       "output_tokens": 2.5}}).encode())]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(60, usd=1, tracer=spans.tracer) as budget:
        for path in ("/v1/chat/completions", "/v1/chat/completions", "/v1/messages"):
            with budget.step("model", "m", price=GPT, max_output_tokens=100) as call:
                assert client.post(f"{url}{path}", json={"model": "m"}).status_code == 200
                assert call.usage is None
    assert all(usage_attributes(step) == {} for step in spans.steps())


def test_a_partly_valid_usage_keeps_its_valid_fields() -> None:
    found = from_body(OPENAI_CHAT, json.dumps({"usage": {
        "prompt_tokens": 100, "completion_tokens": "7",
        "prompt_tokens_details": {"cached_tokens": -5}}}).encode())
    assert found == Usage(100, None, None, None, None)
    assert from_body(ANTHROPIC_MESSAGES, b'{"usage": {"cache_read_input_tokens": 9}}') == Usage(
        None, None, 9, None, None)
    for garbage in (b"", b"not json", b"[1]", b"{" * 100_000, b'{"usage": 5}'):
        assert from_body(OPENAI_CHAT, garbage) is None


def test_a_gzip_compressed_answer_is_read_for_its_usage() -> None:
    spans = capture()
    body = gzip.compress(json.dumps({"usage": {"prompt_tokens": 50,
                                               "completion_tokens": 5}}).encode())
    script = ScriptState({"/v1/chat/completions": [(200, 0.0, {
        "Content-Type": "application/json", "Content-Encoding": "gzip"}, body)]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client, \
            RunBudget(60, tracer=spans.tracer) as budget, budget.step("model", "m") as call:
        assert client.post(f"{url}/v1/chat/completions", json={}).json()["usage"]
        assert call.usage == Usage(50, 5, None, None, None)


def test_the_responses_api_usage_is_read_from_its_body_and_its_completed_event() -> None:
    usage = {"input_tokens": 300, "output_tokens": 40,
             "input_tokens_details": {"cached_tokens": 100},
             "output_tokens_details": {"reasoning_tokens": 12}}
    assert from_body(OPENAI_RESPONSES, json.dumps({"usage": usage}).encode()) == Usage(
        300, 40, 100, None, 12)
    reader = StreamUsage(OPENAI_RESPONSES)
    reader.feed(b'event: response.output_text.delta\ndata: {"type": "x", "delta": "usage"}\n\n')
    reader.feed(b'event: response.completed\ndata: ' + json.dumps(
        {"type": "response.completed", "response": {"usage": usage}}).encode() + b"\n\n")
    assert reader.usage == Usage(300, 40, 100, None, 12)


def test_an_event_stream_is_read_in_any_chunking_and_a_cut_one_keeps_what_it_said() -> None:
    events = (b'event: message_start\ndata: {"type": "message_start", "message": {"usage": '
              b'{"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}}}\n\n'
              b'data: {"type": "content_block_delta", "delta": {"text": "usage usage"}}\n\n'
              b'data: {"type": "message_delta", "usage": {"output_tokens": 33}}\n\n')
    whole = StreamUsage(ANTHROPIC_MESSAGES)
    whole.feed(events)
    by_byte = StreamUsage(ANTHROPIC_MESSAGES)
    for index in range(len(events)):
        by_byte.feed(events[index:index + 1])
    assert whole.usage == by_byte.usage == Usage(100, 33, 90, None, None)
    cut = StreamUsage(ANTHROPIC_MESSAGES)
    cut.feed(events[:events.index(b"data: {\"type\": \"content_block_delta")])
    assert cut.usage == Usage(100, 1, 90, None, None)  # the input, and the output so far
    huge = StreamUsage(OPENAI_CHAT)
    huge.feed(b"data: " + b"x" * (StreamUsage.MAX_LINE + 10))  # dropped, not held
    huge.feed(b'usage"}\ndata: {"usage": {"prompt_tokens": 1, "completion_tokens": 2}}\n')
    assert huge.usage == Usage(1, 2, None, None, None)


def test_requests_outside_a_step_or_not_to_a_model_api_are_sent_as_they_are() -> None:
    script = ScriptState({})
    body = {"model": "m", "max_tokens": 9999, "stream": True}
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport()) as client:
        client.post(f"{url}/v1/chat/completions", json=body)  # outside any budget
        with RunBudget(60, usd=1, clock=ManualClock()) as budget:
            client.post(f"{url}/v1/chat/completions", json=body)  # outside any step
            with budget.step("model", "m", max_output_tokens=10, price=GPT):
                client.post(f"{url}/v1/search", json=body)  # not a model API
                client.post(f"{url}/v1/chat/completions", content=b"max_tokens=9999")
            with budget.step("model", "m", max_output_tokens=10, price=GPT):
                client.post(f"{url}/v1/chat/completions", json=body)
    sent = [json.loads(raw) if raw.startswith(b"{") else raw
            for path in ("/v1/chat/completions", "/v1/search")
            for raw in script.bodies[path]]
    assert sent[:2] == [body, body] and sent[2] == b"max_tokens=9999"
    assert sent[3] == {**body, "max_tokens": 10, "stream_options": {"include_usage": True}}
    assert sent[4] == body
