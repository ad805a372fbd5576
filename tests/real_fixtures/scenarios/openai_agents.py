"""An OpenAI Agents SDK agent (chat-completions model on the fake server) traced by OpenInference's
openai-agents instrumentor; its tools call the fake tool server with httpx, instrumented too.
The SDK's own tool timeout gives up on fetch_report and hands the model the result text
"Tool 'fetch_report' timed out after 0.3 seconds." (a successful tool call, by default)."""

from __future__ import annotations

import asyncio

import httpx
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
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
from openai import AsyncOpenAI, RateLimitError
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

MODEL = "gpt-4o-mini"
AGENT = "support-agent"
SERVICE = "openai-agents-app"
tool_calls: list[Step] = []  # what the tools themselves saw, timed by them


@function_tool(timeout=CLIENT_TIMEOUT_S)
async def fetch_report(report_id: int) -> str:
    """Fetch a report by id."""
    step = Step("tool", "fetch_report", "client_timeout", "GET /slow (SDK timeout 0.3 s)",
                start_ns=now_ns())
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            return (await client.get(TOOL_URL + "/slow")).text
    except asyncio.CancelledError:
        step.call += ", cancelled by the SDK"
        raise
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


@function_tool
async def lookup_invoice(invoice_id: int) -> str:
    """Look an invoice up (a slow success)."""
    step = Step("tool", "lookup_invoice", "ok", "GET /delay", top_level=False, start_ns=now_ns())
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            return (await client.get(TOOL_URL + "/delay")).text
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


@function_tool
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
    """The fake model's own record of the calls it served since `since`, as steps."""
    served = served_model_calls()[since:]
    assert len(served) == len(classes), (served, classes)
    return [Step("model", MODEL, cls, f"chat → {call['action']}", start_ns=call["start_ns"],
                 end_ns=call["end_ns"]) for call, cls in zip(served, classes, strict=True)]


async def main() -> None:
    provider = tracer_provider(SERVICE)
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    HTTPXClientInstrumentor().instrument()
    tracer = trace.get_tracer("support-app")
    truth = Truth("openai_agents", ["openai-agents", "openinference-instrumentation-openai-agents",
                                    "openai", "opentelemetry-instrumentation-httpx",
                                    "opentelemetry-sdk"])
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(
        base_url=MODEL_URL, max_retries=0, timeout=5))
    agent = Agent(name=AGENT, instructions="Answer with the tools.", model=model,
                  tools=[fetch_report, create_ticket])

    # Run 0: the SDK alone, no span of the app's own: one model call inside the lone agent.
    with truth.run(AGENT, None, note="SDK trace only; lone agent with one model call") as run:
        await Runner.run(agent, "hello")
        for step in model_steps(0, ["ok"]):
            run.add(step)

    # Run 1: the app's root span carries the budget; the deadline falls inside fetch_report,
    # which the SDK's own timeout ends.
    script_model({"do": "tool_call", "name": "fetch_report", "arguments": {"report_id": 7}},
                 {"do": "tool_call", "name": "create_ticket", "arguments": {"title": "late"}},
                 {"do": "ok", "text": "done"})
    with truth.run(AGENT, 250, note="deadline inside fetch_report, ended by the SDK timeout") \
            as run, root_span(tracer, run, "support request",
                                                 attributes={"budget.total_ms": 250}) as root:
        run.trace_id = trace_id_of(root)
        before = len(served_model_calls())
        result = await Runner.run(agent, "summarise report 7")
        assert result.final_output == "done", result.final_output
        for step in model_steps(before, ["ok", "ok", "ok"]) + tool_calls:
            run.add(step)
        tool_calls.clear()

    # Run 2: the model answers 429 and the SDK gives up (the client does not retry here).
    script_model({"do": "status", "code": 429})
    with truth.run(AGENT, 10_000, note="model 429, run fails") as run, \
            root_span(tracer, run, "support request",
                                         attributes={"budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        before = len(served_model_calls())
        try:
            await Runner.run(agent, "again")
            raise AssertionError("the 429 did not reach the app")
        except RateLimitError:
            pass
        for step in model_steps(before, ["upstream_error"]):
            run.add(step)

    # Run 3: a handoff. support-agent's model hands off to billing-agent, whose model calls a slow
    # tool and answers: two agents side by side, two subagent steps (docs/conventions.md), with the
    # model and tool calls nested in them. The handoff is a TOOL span named by the SDK's
    # instrumentor ("handoff to billing-agent"; it carries no tool.name).
    billing = Agent(name="billing-agent", instructions="Answer billing questions.", model=model,
                    tools=[lookup_invoice])
    triage = Agent(name=AGENT, instructions="Hand billing questions off.", model=model,
                   handoffs=[billing])
    script_model({"do": "tool_call", "name": "transfer_to_billing_agent", "arguments": {}},
                 {"do": "tool_call", "name": "lookup_invoice", "arguments": {"invoice_id": 9}},
                 {"do": "ok", "text": "paid"})
    # Neither agent stands alone among the run's top-level steps, so the run belongs to the
    # service (docs/conventions.md, "The run's agent"), not to whichever agent started first.
    with truth.run(SERVICE, 10_000, note="handoff: two agents side by side") as run, \
            root_span(tracer, run, "support request",
                                         attributes={"budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        before = len(served_model_calls())
        result = await Runner.run(triage, "was invoice 9 paid?")
        assert result.final_output == "paid", result.final_output
        first, second, third = model_steps(before, ["ok", "ok", "ok"])
        # each agent span starts just before its first model call and ends after its last call
        run.add(Step("subagent", AGENT, "ok", "support-agent: one model call, then the handoff",
                     start_ns=first.start_ns - 1000, end_ns=first.end_ns))
        run.add(Step("subagent", "billing-agent", "ok",
                     "billing-agent: model, lookup_invoice (0.2 s), model",
                     start_ns=second.start_ns - 1000, end_ns=third.end_ns))
        run.add(Step("tool", "handoff to billing-agent", "ok",
                     "the model called transfer_to_billing_agent", top_level=False,
                     start_ns=first.end_ns, end_ns=first.end_ns))
        for step in (first, second, third, *tool_calls):
            step.top_level = False
            run.add(step)
        tool_calls.clear()

    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    asyncio.run(main())
