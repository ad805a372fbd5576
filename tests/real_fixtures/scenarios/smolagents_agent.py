"""A smolagents ToolCallingAgent (smolagents' OpenAIModel on the fake model server) traced by
OpenInference's smolagents instrumentor: an AGENT span `<agent>.run` (no agent name attribute),
a CHAIN span `Step N` per step, an LLM span `OpenAIModel.generate` per model call and a TOOL span
per tool call (the final answer is a tool call too: `final_answer`). The tools call the fake tool
server with httpx, instrumented (which also traces the model client's requests).

When the model call fails, agent.run raises and the instrumentor records the exception on its AGENT
span but never ends it (nor detaches its context): that span never reaches the exporter. A run with
no span of the app's own around it is then a trace whose root never arrives (docs/conventions.md,
root_missing); each run here starts from a clean context, as a new request would."""

from __future__ import annotations

import contextvars
from typing import Any

import httpx
import openai
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
from openinference.instrumentation import TraceConfig
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from smolagents import OpenAIModel, ToolCallingAgent, tool
from smolagents.utils import AgentGenerationError

MODEL = "gpt-4o-mini"
# the resource's service.name: the AGENT span has no agent name attribute (docs/conventions.md row
# 10: an unnamed agent span is a wrapper), so no span names the run's agent
SERVICE = "smolagents-app"
tool_calls: list[Step] = []  # what the tools themselves saw, timed by them
tools_http: httpx.Client  # made once instrumented


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
def lookup_invoice(invoice_id: int) -> str:
    """Look an invoice up.

    Args:
        invoice_id: the invoice's id
    """
    step = Step("tool", "lookup_invoice", "ok", "GET /ok", start_ns=now_ns())
    try:
        return tools_http.get(TOOL_URL + "/ok", timeout=GENEROUS_TIMEOUT_S).text
    finally:
        step.end_ns = now_ns()
        tool_calls.append(step)


def timed(model: OpenAIModel) -> list[Step]:
    """Time each model call where the agent makes it: the instance's generate, in front of the
    instrumented class method (the span and its name stay the instrumentor's). The fake
    server's own timing would miss the client's work, some 50 ms of each call here."""
    calls: list[Step] = []
    generate = model.generate

    def timed_generate(*args: Any, **kwargs: Any) -> Any:
        step = Step("model", MODEL, "ok", "OpenAIModel.generate → 2xx", start_ns=now_ns())
        try:
            return generate(*args, **kwargs)
        except (openai.InternalServerError, openai.RateLimitError) as error:
            step.cls, step.call = "upstream_error", f"OpenAIModel.generate → {error.status_code}"
            raise
        finally:
            step.end_ns = now_ns()
            calls.append(step)

    model.generate = timed_generate  # type: ignore[method-assign]
    return calls


def final_answer_step(after: Step, end_ns: int) -> Step:
    """smolagents' own final_answer tool, called once the last model call asked for it: the
    harness has no hook in it, so it spans from that model call's end to agent.run returning
    (well under a millisecond of work, after every deadline here)."""
    return Step("tool", "final_answer", "ok", "the model called final_answer",
                start_ns=after.end_ns, end_ns=end_ns)


def answer(text: str) -> dict[str, Any]:
    return {"do": "tool_call", "name": "final_answer", "arguments": {"answer": text}}


def main() -> None:
    provider = tracer_provider(SERVICE)
    # inputs and outputs hidden (OpenInference's own switches): nothing in them is read by §9
    SmolagentsInstrumentor().instrument(tracer_provider=provider, config=TraceConfig(
        hide_inputs=True, hide_outputs=True, hide_input_messages=True,
        hide_output_messages=True))
    HTTPXClientInstrumentor().instrument()
    global tools_http
    tools_http = httpx.Client()  # one for every tool call, as a real tool module would keep
    tracer = trace.get_tracer("support-app")
    truth = Truth("smolagents", ["smolagents", "openinference-instrumentation-smolagents",
                                 "openai", "opentelemetry-instrumentation-httpx",
                                 "opentelemetry-sdk"])
    # retry=False: smolagents retries a rate-limited call itself (with waits) by default
    model = OpenAIModel(model_id=MODEL, api_base=MODEL_URL, api_key="sk-fake",
                        client_kwargs={"max_retries": 0, "timeout": GENEROUS_TIMEOUT_S},
                        retry=False)
    model_calls = timed(model)

    def agent() -> ToolCallingAgent:
        return ToolCallingAgent(tools=[fetch_report, lookup_invoice], model=model,
                                name="support_agent", max_steps=5, verbosity_level=0)

    def attempt(run: Run, task: str, classes: list[str], fails: bool) -> None:
        """One agent.run; the model calls and the tools, as timed where they are made, become
        the run's steps (a final_answer step after the last model call when the run completes)."""
        try:
            agent().run(task)
            assert not fails, "the model's error did not reach the app"
        except AgentGenerationError:
            assert fails, "the run failed"
        assert [step.cls for step in model_calls] == classes, (model_calls, classes)
        steps = model_calls + tool_calls
        if not fails:
            steps.append(final_answer_step(model_calls[-1], now_ns()))
        for step in steps:
            run.add(step)
        model_calls.clear()
        tool_calls.clear()

    def unwrapped(note: str, task: str, classes: list[str], fails: bool) -> None:
        # a fresh context, as a new request would have: a failed run leaves the AGENT span's
        # context attached, which would make the next run part of this trace
        def go() -> None:
            with truth.run(SERVICE, None, note=note) as run:
                run.root_missing = fails
                attempt(run, task, classes, fails)
        contextvars.Context().run(go)

    # Run 0: no span of the app's own; the model asks for a tool, then answers: the AGENT span
    # ends and is the trace's root.
    script_model({"do": "tool_call", "name": "lookup_invoice", "arguments": {"invoice_id": 9}},
                 answer("paid"))
    unwrapped("no root of the app's own; completes", "was invoice 9 paid?", ["ok", "ok"],
              fails=False)

    # Run 1: no span of the app's own; the model answers 503: agent.run raises, the AGENT span
    # never ends, the trace's root never arrives (its Step 1 and LLM spans do).
    script_model({"do": "status", "code": 503})
    unwrapped("no root of the app's own; model 503, the AGENT span never ends",
              "was invoice 9 paid?", ["upstream_error"], fails=True)

    # Run 2: the same after a tool call; the model answers 429 on the second step: two CHAIN
    # step spans whose parent never arrives.
    script_model({"do": "tool_call", "name": "lookup_invoice", "arguments": {"invoice_id": 9}},
                 {"do": "status", "code": 429})
    unwrapped("no root of the app's own; a tool, then model 429, the AGENT span never ends",
              "was invoice 9 paid?", ["ok", "upstream_error"], fails=True)

    # Run 3: the app's root carries the budget; exhausted. A slow 2xx model call (0.2 s) is the
    # culprit; the tool that follows times out (0.3 s, caught by the tool) and holds the
    # deadline (350 ms).
    script_model({"do": "slow", "seconds": 0.2,
                  "then": {"do": "tool_call", "name": "fetch_report",
                           "arguments": {"report_id": 8}}},
                 answer("late"))
    with truth.run(SERVICE, 350, note="slow model call the culprit, a timed-out tool holds the "
                   "deadline") as run, \
            root_span(tracer, run, "support request", {"budget.total_ms": 350}) as root:
        run.trace_id = trace_id_of(root)
        attempt(run, "summarise report 8", ["ok", "ok"], fails=False)

    # Run 4: the app's root, and a model 503 after a tool (the first model call, slow, is the
    # culprit): the AGENT span never ends, so its children's parent never arrives while the
    # trace's root does.
    script_model({"do": "slow", "seconds": 0.2,
                  "then": {"do": "tool_call", "name": "lookup_invoice",
                           "arguments": {"invoice_id": 9}}},
                 {"do": "status", "code": 503})
    with truth.run(SERVICE, 10_000, note="app root; a tool, then model 503: the AGENT span "
                   "under the root never ends") as run, \
            root_span(tracer, run, "support request", {"budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        attempt(run, "was invoice 9 paid?", ["ok", "upstream_error"], fails=True)

    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
