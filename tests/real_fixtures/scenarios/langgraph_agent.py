"""A LangGraph ReAct agent (langgraph's create_react_agent, langchain-openai's ChatOpenAI on the
fake model) traced by OpenInference's langchain instrumentor, its tools calling the fake tool
server with httpx (instrumented too). fetch_report lets its httpx timeout escape and the
ToolNode hands the model the error; lookup_customer catches its own timeout and returns a text."""

from __future__ import annotations

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
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import ToolNode, create_react_agent
from openai import InternalServerError
from openinference.instrumentation import TraceConfig
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

MODEL = "gpt-4o-mini"
AGENT = "langgraph-app"  # the resource's service.name: no span names an agent
tool_calls: list[Step] = []


@tool
def fetch_report(report_id: int) -> str:
    """Fetch a report by id."""
    step = Step("tool", "fetch_report", "client_timeout",
                "GET /slow (httpx timeout 0.3 s, raised to the ToolNode)", start_ns=now_ns())
    try:
        return httpx.get(TOOL_URL + "/slow", timeout=CLIENT_TIMEOUT_S).text
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


@tool
def lookup_customer(customer_id: int) -> str:
    """Look a customer up."""
    step = Step("tool", "lookup_customer", "client_timeout",
                "GET /slow (httpx timeout 0.3 s, caught by the tool)", start_ns=now_ns())
    try:
        return httpx.get(TOOL_URL + "/slow", timeout=CLIENT_TIMEOUT_S).text
    except httpx.TimeoutException:
        return "the customer service did not answer"
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


def model_steps(since: int, classes: list[str]) -> list[Step]:
    served = served_model_calls()[since:]
    assert len(served) == len(classes), (served, classes)
    return [Step("model", MODEL, cls, f"chat → {call['action']}", start_ns=call["start_ns"],
                 end_ns=call["end_ns"]) for call, cls in zip(served, classes, strict=True)]


def main() -> None:
    provider = tracer_provider(AGENT)
    # inputs, outputs and messages hidden (OpenInference's own switches): each span would
    # carry the whole conversation so far, 150 KB for these three runs
    LangChainInstrumentor().instrument(tracer_provider=provider, config=TraceConfig(
        hide_inputs=True, hide_outputs=True, hide_input_messages=True,
        hide_output_messages=True))
    HTTPXClientInstrumentor().instrument()
    tracer = trace.get_tracer("support-app")
    truth = Truth("langgraph", ["langgraph", "langchain-openai", "langchain-core",
                                "openinference-instrumentation-langchain", "openai",
                                "opentelemetry-instrumentation-httpx", "opentelemetry-sdk"])
    model = ChatOpenAI(model=MODEL, base_url=MODEL_URL, api_key="sk-fake", max_retries=0,
                       timeout=5)
    graph = create_react_agent(model, ToolNode([fetch_report, lookup_customer],
                                               handle_tool_errors=True))

    # Run 0: the graph alone, no span of the app's own; one model call.
    with truth.run(AGENT, None, note="LangGraph trace only; one model call") as run:
        graph.invoke({"messages": [("user", "hello")]})
        for step in model_steps(0, ["ok"]):
            run.add(step)

    # Run 1: the app's root carries the budget; the deadline falls inside fetch_report.
    script_model({"do": "tool_call", "name": "fetch_report", "arguments": {"report_id": 7}},
                 {"do": "tool_call", "name": "lookup_customer", "arguments": {"customer_id": 3}},
                 {"do": "ok", "text": "done"})
    with truth.run(AGENT, 250, note="deadline inside fetch_report") as run, \
            root_span(tracer, run, "support request", {"budget.total_ms": 250}) as root:
        run.trace_id = trace_id_of(root)
        before = len(served_model_calls())
        result = graph.invoke({"messages": [("user", "summarise report 7")]})
        assert result["messages"][-1].content == "done", result["messages"][-1]
        for step in model_steps(before, ["ok", "ok", "ok"]) + tool_calls:
            run.add(step)
        tool_calls.clear()

    # Run 2: the model answers 503 and the graph fails.
    script_model({"do": "status", "code": 503})
    with truth.run(AGENT, 10_000, note="model 503, run fails") as run, \
            root_span(tracer, run, "support request", {"budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        before = len(served_model_calls())
        try:
            graph.invoke({"messages": [("user", "again")]})
            raise AssertionError("the 503 did not reach the app")
        except InternalServerError:
            pass
        for step in model_steps(before, ["upstream_error"]):
            run.add(step)

    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
