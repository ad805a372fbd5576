"""A Strands Agents agent (strands-agents' OpenAIModel, non-streaming, on the fake model server)
with Strands' own OpenTelemetry spans on the global provider: `invoke_agent support-agent`, one
`execute_event_loop_cycle` per model turn, and below each cycle the model call (`chat`) and the
tool calls (`execute_tool <name>`). Its tools call the fake tool server with httpx, instrumented
(opentelemetry-instrumentation-httpx), which also traces the model client's requests."""

from __future__ import annotations

import httpx
from harness import (
    CLIENT_TIMEOUT_S,
    GENEROUS_TIMEOUT_S,
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
from strands import Agent, tool
from strands.models.openai import OpenAIModel

MODEL = "gpt-4o-mini"
AGENT = "support-agent"
tool_calls: list[Step] = []  # what the tools themselves saw, timed by them
# one client for every tool call: httpx.get() would build a client (and its TLS context, some
# 80 ms here) inside each call, time the tool's span holds before its GET starts
tools_http = httpx.Client()


@tool
def fetch_report(report_id: int) -> str:
    """Fetch a report by id.

    Args:
        report_id: the report's id
    """
    step = Step("tool", "fetch_report", "client_timeout",
                "GET /slow (httpx timeout 0.3 s, caught by the tool)", start_ns=now_ns())
    try:
        return tools_http.get(TOOL_URL + "/slow", timeout=CLIENT_TIMEOUT_S).text
    except httpx.TimeoutException:
        return "the report service did not answer"
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


@tool
def check_status(service: str) -> str:
    """Check a service's status.

    Args:
        service: the service's name
    """
    step = Step("tool", "check_status", "upstream_error",
                "GET /503 (raise_for_status: the 503 leaves the tool)", start_ns=now_ns())
    try:
        response = tools_http.get(TOOL_URL + "/503", timeout=GENEROUS_TIMEOUT_S)
        response.raise_for_status()
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


def main() -> None:
    provider = tracer_provider("strands-app")
    HTTPXClientInstrumentor().instrument()
    tracer = trace.get_tracer("support-app")
    truth = Truth("strands", ["strands-agents", "openai", "opentelemetry-sdk",
                              "opentelemetry-instrumentation-httpx"])

    def agent() -> Agent:
        # A fresh agent per run (Strands keeps the conversation on the agent), with a client of
        # its own: given only client_args, Strands builds an AsyncOpenAI for each model call,
        # some 85 ms inside the `chat` span before the request leaves, which the fake server's
        # timing of the call would not see. One client serves one run, on one event loop.
        client = AsyncOpenAI(base_url=MODEL_URL, api_key="sk-fake", max_retries=0,
                             timeout=GENEROUS_TIMEOUT_S)
        model = OpenAIModel(client=client, model_id=MODEL, stream=False)
        return Agent(model=model, name=AGENT, tools=[fetch_report, check_status],
                     system_prompt="Answer with the tools.", callback_handler=None)

    # Run 0: the agent alone, no span of the app's own: one model call inside the lone agent
    # (it also takes the first call's one-off costs out of the runs with a budget).
    with truth.run(AGENT, None, note="Strands trace only; lone agent, one model call") as run:
        before = len(served_model_calls())
        agent()("hello")
        for step in model_steps(before, ["ok"]):
            run.add(step)

    # Run 1: within budget. The tool's own httpx timeout (caught: it returns a text), a tool
    # whose 503 leaves it (Strands hands the model an error result), a slow 2xx model call
    # (0.5 s) that is the culprit, the answer.
    script_model({"do": "tool_call", "name": "fetch_report", "arguments": {"report_id": 7}},
                 {"do": "tool_call", "name": "check_status", "arguments": {"service": "db"}},
                 {"do": "slow", "seconds": 0.5,
                  "then": {"do": "ok", "text": "report 7 is late, the db is down"}})
    with truth.run(AGENT, 10_000, note="tool timeout caught by the tool, tool 503, slow 2xx "
                   "model call the culprit") as run, \
            root_span(tracer, run, "support request", {"budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        before = len(served_model_calls())
        result = agent()("summarise report 7")
        assert "db is down" in str(result), result
        for step in model_steps(before, ["ok", "ok", "ok"]) + tool_calls:
            run.add(step)
        tool_calls.clear()

    # Run 2: exhausted. A slow 2xx model call (0.2 s) is the culprit; the tool that follows
    # times out (0.3 s, caught by the tool) and holds the deadline (350 ms).
    script_model({"do": "slow", "seconds": 0.2,
                  "then": {"do": "tool_call", "name": "fetch_report",
                           "arguments": {"report_id": 8}}},
                 {"do": "ok", "text": "late"})
    with truth.run(AGENT, 350, note="slow model call the culprit, a timed-out tool holds the "
                   "deadline") as run, \
            root_span(tracer, run, "support request", {"budget.total_ms": 350}) as root:
        run.trace_id = trace_id_of(root)
        before = len(served_model_calls())
        result = agent()("summarise report 8")
        assert str(result).strip() == "late", result
        for step in model_steps(before, ["ok", "ok"]) + tool_calls:
            run.add(step)
        tool_calls.clear()

    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
