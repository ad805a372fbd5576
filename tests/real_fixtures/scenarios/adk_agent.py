"""A Google ADK agent (LlmAgent with LiteLLM's `openai/gpt-4o-mini`, api_base the fake model
server) with ADK's own OpenTelemetry spans on the global provider: `invocation`, `invoke_agent`,
`call_llm` / `generate_content`, `execute_tool <name>`, and after a batch of parallel tool calls
an `execute_tool` span of its own with gen_ai.tool.name = "(merged tools)". Its tools call the
fake tool server with httpx, instrumented (opentelemetry-instrumentation-httpx)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from google.adk.agents import LlmAgent
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.genai import types
from harness import (
    CLIENT_TIMEOUT_S,
    GENEROUS_TIMEOUT_S,
    MODEL_URL,
    TOOL_URL,
    Run,
    Step,
    Truth,
    now_ns,
    root_span,
    script_model,
    trace_id_of,
    tracer_provider,
)
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

MODEL = "openai/gpt-4o-mini"  # LiteLLM's provider/model, as the app gives it to ADK
AGENT = "support_agent"
tool_calls: list[Step] = []  # what the tools themselves saw, timed by them
model_calls: list[Step] = []  # timed by ADK's model callbacks, around each model call
tools_http: httpx.AsyncClient  # made once instrumented


async def fetch_report(report_id: int) -> str:
    """Fetch a report by id; it may take a while."""
    step = Step("tool", "fetch_report", "client_timeout",
                "GET /slow (httpx timeout 0.3 s, caught by the tool)", start_ns=now_ns())
    try:
        return (await tools_http.get(TOOL_URL + "/slow", timeout=CLIENT_TIMEOUT_S)).text
    except httpx.TimeoutException:
        return "the report service did not answer"
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


async def lookup_invoice(invoice_id: int) -> str:
    """Look an invoice up."""
    step = Step("tool", "lookup_invoice", "ok", "GET /ok", start_ns=now_ns())
    try:
        return (await tools_http.get(TOOL_URL + "/ok", timeout=GENEROUS_TIMEOUT_S)).text
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


async def lookup_customer(customer_id: int) -> str:
    """Look a customer up (a slow success)."""
    step = Step("tool", "lookup_customer", "ok", "GET /delay (0.2 s)", start_ns=now_ns())
    try:
        return (await tools_http.get(TOOL_URL + "/delay", timeout=GENEROUS_TIMEOUT_S)).text
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


def before_model(callback_context: Any, llm_request: Any) -> None:
    model_calls.append(Step("model", MODEL, "ok", "LiteLLM acompletion → 2xx",
                            start_ns=now_ns()))


def after_model(callback_context: Any, llm_response: Any) -> None:
    model_calls[-1].end_ns = now_ns()


def model_error(callback_context: Any, llm_request: Any, error: Exception) -> None:
    step = model_calls[-1]
    step.end_ns = now_ns()
    status = getattr(error, "status_code", None)
    assert status in (429, 503), error
    step.cls, step.call = "upstream_error", f"LiteLLM acompletion → {status}"


def main() -> None:
    provider = tracer_provider("adk-app")
    HTTPXClientInstrumentor().instrument()
    global tools_http
    tools_http = httpx.AsyncClient()  # one for every tool call, as a real tool module keeps
    tracer = trace.get_tracer("support-app")
    truth = Truth("adk", ["google-adk", "litellm", "openai", "opentelemetry-sdk",
                          "opentelemetry-instrumentation-httpx"])
    model = LiteLlm(model=MODEL, api_base=MODEL_URL, api_key="sk-fake",
                    timeout=GENEROUS_TIMEOUT_S, num_retries=0, max_retries=0)
    agent = LlmAgent(name=AGENT, model=model, instruction="Answer with the tools.",
                     tools=[fetch_report, lookup_invoice, lookup_customer],
                     before_model_callback=before_model, after_model_callback=after_model,
                     on_model_error_callback=model_error)
    runner = InMemoryRunner(agent=agent, app_name="support")

    async def ask(run: Run, text: str, fails: bool = False) -> None:
        """One runner.run_async in a new session; the model and tool calls become the run's
        steps."""
        session = await runner.session_service.create_session(app_name="support", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text=text)])
        try:
            async for _ in runner.run_async(user_id="u", session_id=session.id,
                                            new_message=message):
                pass
            assert not fails, "the model's error did not reach the app"
        except Exception as error:  # LiteLLM's own error types, whatever ADK wraps them in
            if not fails:
                raise
            assert getattr(error, "status_code", None) in (429, 503), error
        for step in model_calls + tool_calls:
            run.add(step)
        model_calls.clear()
        tool_calls.clear()

    async def scenario() -> None:
        # Run 0: no span of the app's own. The model asks for two tools at once; ADK runs them
        # in parallel and records the batch as an extra "(merged tools)" span; then it answers.
        script_model({"do": "tool_call", "calls": [
                         {"name": "lookup_invoice", "arguments": {"invoice_id": 9}},
                         {"name": "lookup_customer", "arguments": {"customer_id": 3}}]},
                     {"do": "ok", "text": "paid"})
        with truth.run(AGENT, None, note="ADK trace only; two parallel tool calls") as run:
            await ask(run, "was invoice 9 paid?")

        # Run 1: the app's root; a tool that catches its own timeout, then the model answers
        # 429 and the run fails.
        script_model({"do": "tool_call", "name": "fetch_report", "arguments": {"report_id": 7}},
                     {"do": "status", "code": 429})
        with truth.run(AGENT, 10_000, note="tool timeout caught by the tool, then model 429") \
                as run, root_span(tracer, run, "support request",
                                  {"budget.total_ms": 10_000}) as root:
            run.trace_id = trace_id_of(root)
            await ask(run, "summarise report 7", fails=True)

        # Run 2: exhausted. A slow 2xx model call (0.2 s) is the culprit; the tool that follows
        # times out (0.3 s, caught by the tool) and holds the deadline (350 ms).
        script_model({"do": "slow", "seconds": 0.2,
                      "then": {"do": "tool_call", "name": "fetch_report",
                               "arguments": {"report_id": 8}}},
                     {"do": "ok", "text": "late"})
        with truth.run(AGENT, 350, note="slow model call the culprit, a timed-out tool holds "
                       "the deadline") as run, \
                root_span(tracer, run, "support request", {"budget.total_ms": 350}) as root:
            run.trace_id = trace_id_of(root)
            await ask(run, "summarise report 8")

        # Run 3: the app's root; a slow model call (0.3 s, the culprit) asks for two tools at
        # once (one 0.2 s), then a 503 fails the run.
        script_model({"do": "slow", "seconds": 0.3, "then": {"do": "tool_call", "calls": [
                         {"name": "lookup_invoice", "arguments": {"invoice_id": 9}},
                         {"name": "lookup_customer", "arguments": {"customer_id": 3}}]}},
                     {"do": "status", "code": 503})
        with truth.run(AGENT, 10_000, note="two parallel tool calls, then model 503") as run, \
                root_span(tracer, run, "support request", {"budget.total_ms": 10_000}) as root:
            run.trace_id = trace_id_of(root)
            await ask(run, "was invoice 9 paid?", fails=True)

    asyncio.run(scenario())
    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
