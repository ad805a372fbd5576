"""A pydantic-ai agent (OpenAI chat model on the fake server) with pydantic-ai's own
OpenTelemetry instrumentation (`Agent.instrument_all()`, the global SDK provider).
fetch_report has a 0.3 s tool timeout: pydantic-ai gives up on it and sends the model a retry
prompt (ToolRetryError on the tool's span, and nothing in its cancelled httpx child).
lookup_customer's own httpx client times out instead; the tool asks the model to retry
(ModelRetry → ToolRetryError), and the httpx.ReadTimeout is on the nested HTTP span."""

from __future__ import annotations

import asyncio

import httpx
from harness import (
    CLIENT_TIMEOUT_S,
    MODEL_URL,
    TOOL_URL,
    Step,
    Truth,
    now_ns,
    root_span,
    script_model,
    served_model_calls,
    trace_id_of,
    tracer_provider,
)
from openai import AsyncOpenAI
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

MODEL = "gpt-4o-mini"
AGENT = "support-agent"
tool_calls: list[Step] = []

model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=AsyncOpenAI(
    base_url=MODEL_URL, max_retries=0, timeout=5)))
# the documented switch for every agent: pydantic-ai's Instrumentation capability, on the
# global tracer provider, with its defaults (content included: with include_content=False the
# tool span loses gen_ai.tool.call.result and exception.message, "Timed out after 0.3 seconds.")
Agent.instrument_all(True)
agent = Agent(model, name=AGENT, instructions="Answer with the tools.")


@agent.tool_plain(timeout=CLIENT_TIMEOUT_S)
async def fetch_report(report_id: int) -> str:
    """Fetch a report by id."""
    step = Step("tool", "fetch_report", "client_timeout",
                "GET /slow (pydantic-ai tool timeout 0.3 s)", start_ns=now_ns())
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            return (await client.get(TOOL_URL + "/slow")).text
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


@agent.tool_plain
async def lookup_customer(customer_id: int) -> str:
    """Look a customer up."""
    step = Step("tool", "lookup_customer", "client_timeout",
                "GET /slow (httpx timeout 0.3 s, then ModelRetry)", start_ns=now_ns())
    try:
        async with httpx.AsyncClient(timeout=CLIENT_TIMEOUT_S) as client:
            return (await client.get(TOOL_URL + "/slow")).text
    except httpx.TimeoutException:
        raise ModelRetry("the customer service did not answer; try later") from None
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


@agent.tool_plain
async def create_ticket(title: str) -> str:
    """Open a ticket."""
    step = Step("tool", "create_ticket", "ok", "POST /write", start_ns=now_ns(),
                side_effect="write")
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.post(TOOL_URL + "/write", json={"title": title})
        assert response.status_code == 201
        return response.text
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


def model_steps(since: int, classes: list[str]) -> list[Step]:
    served = served_model_calls()[since:]
    assert len(served) == len(classes), (served, classes)
    return [Step("model", MODEL, cls, f"chat → {call['action']}", start_ns=call["start_ns"],
                 end_ns=call["end_ns"]) for call, cls in zip(served, classes, strict=True)]


async def main() -> None:
    provider = tracer_provider("pydantic-ai-app")
    HTTPXClientInstrumentor().instrument()
    tracer = trace.get_tracer("support-app")
    truth = Truth("pydantic_ai", ["pydantic-ai-slim", "openai", "opentelemetry-sdk",
                                  "opentelemetry-instrumentation-httpx"])

    # Run 0: the agent alone, no span of the app's own; one model call.
    with truth.run(AGENT, None, note="pydantic-ai trace only; lone agent, one model call") \
            as run:
        await agent.run("hello")
        for step in model_steps(0, ["ok"]):
            run.add(step)

    # Run 1: the deadline falls inside fetch_report, which pydantic-ai's tool timeout ends.
    script_model({"do": "tool_call", "name": "fetch_report", "arguments": {"report_id": 7}},
                 {"do": "tool_call", "name": "lookup_customer", "arguments": {"customer_id": 3}},
                 {"do": "tool_call", "name": "create_ticket", "arguments": {"title": "late"}},
                 {"do": "ok", "text": "done"})
    with truth.run(AGENT, 250, note="deadline inside fetch_report, ended by the tool timeout") \
            as run, root_span(tracer, run, "support request",
                                                 attributes={"budget.total_ms": 250}) as root:
        run.trace_id = trace_id_of(root)
        before = len(served_model_calls())
        result = await agent.run("summarise report 7")
        assert result.output == "done", result.output
        for step in model_steps(before, ["ok", "ok", "ok", "ok"]) + tool_calls:
            run.add(step)
        tool_calls.clear()

    # Run 2: the model answers 503 and the run fails.
    script_model({"do": "status", "code": 503})
    with truth.run(AGENT, 10_000, note="model 503, run fails") as run, \
            root_span(tracer, run, "support request",
                                         attributes={"budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        before = len(served_model_calls())
        try:
            await agent.run("again")
            raise AssertionError("the 503 did not reach the app")
        except ModelHTTPError as error:
            assert error.status_code == 503
        for step in model_steps(before, ["upstream_error"]):
            run.add(step)

    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    asyncio.run(main())
