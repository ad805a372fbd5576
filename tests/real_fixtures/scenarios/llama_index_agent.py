"""A LlamaIndex FunctionAgent (workflow agent, non-streaming) on `OpenAILike` against the fake
model server, traced as users run it: OpenInference's LlamaIndex instrumentor (its defaults)
and the httpx instrumentation, which also traces the OpenAI client's requests.

LlamaIndex's dispatcher makes a span of every method an LLM class implements for an abstract one, so
OpenInference records, per model call, `OpenAILike._prepare_chat_with_tools` (LLM kind, ~1 ms, no
I/O: it builds the request) and then `OpenAILike.achat` twice, nested (the outer one LlamaIndex's,
the inner one the LLM's own), with the client's POST below the inner one. docs/conventions.md makes
one step of the nested pair ("One call, two spans") and none of the preparation span ("A preparation
span is not a call"). The harness counts one model call per achat it made.

Tools run inside the workflow: a tool's exception (httpx's ReadTimeout) is recorded on its TOOL
span and handed to the model as an error result, and the run goes on."""

from __future__ import annotations

import asyncio
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
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai_like import OpenAILike
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

MODEL = "gpt-4o-mini"
# no span names an agent (FunctionAgent.run is a CHAIN span): the run's agent is the service
SERVICE = "llama-index-app"
# the deadline of run 2: past the slow model call and the workflow's own steps before it,
# inside the tool call after it (0.3 s)
RUN_2_BUDGET_MS = 450
tool_calls: list[Step] = []  # what the tools themselves saw, timed by them
model_calls: list[Step] = []  # each achat the agent made, timed where it is made
tools_http: httpx.AsyncClient  # made once instrumented; used on the one event loop of runs()


async def fetch_report(report_id: int) -> str:
    """Fetch a report by id."""
    step = Step("tool", "fetch_report", "client_timeout",
                "GET /slow (httpx timeout 0.3 s; the ReadTimeout leaves the tool)",
                start_ns=now_ns())
    try:
        return (await tools_http.get(TOOL_URL + "/slow", timeout=CLIENT_TIMEOUT_S)).text
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


def timed(llm: OpenAILike) -> None:
    """Time each model call where the agent makes it: the instance's achat, in front of the
    dispatcher's spanned class method (the spans and their names stay LlamaIndex's). The
    preparation before it is no call: the harness does not count it."""
    achat = llm.achat

    async def timed_achat(*args: Any, **kwargs: Any) -> Any:
        step = Step("model", MODEL, "ok", "OpenAILike.achat → 2xx", start_ns=now_ns())
        try:
            return await achat(*args, **kwargs)
        except (openai.InternalServerError, openai.RateLimitError) as error:
            step.cls, step.call = "upstream_error", f"OpenAILike.achat → {error.status_code}"
            raise
        finally:
            step.end_ns = now_ns()
            model_calls.append(step)

    # a pydantic model: set on the instance past its validation, as a monkeypatch would
    object.__setattr__(llm, "achat", timed_achat)


def main() -> None:
    provider = tracer_provider(SERVICE)
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    HTTPXClientInstrumentor().instrument()
    global tools_http
    tools_http = httpx.AsyncClient()
    tracer = trace.get_tracer("support-app")
    truth = Truth("llama_index", ["llama-index-core", "llama-index-llms-openai-like",
                                  "openinference-instrumentation-llama-index", "openai",
                                  "opentelemetry-instrumentation-httpx", "opentelemetry-sdk"])
    llm = OpenAILike(model=MODEL, api_base=MODEL_URL, api_key="sk-fake", is_chat_model=True,
                     is_function_calling_model=True, timeout=GENEROUS_TIMEOUT_S, max_retries=0)
    timed(llm)
    tools = [FunctionTool.from_defaults(async_fn=fetch_report),
             FunctionTool.from_defaults(async_fn=lookup_invoice)]

    async def attempt(run: Run, task: str, classes: list[str], fails: bool) -> None:
        """One agent.run; the model calls and the tools, as timed where they are made, become
        the run's steps."""
        agent = FunctionAgent(tools=tools, llm=llm, streaming=False)
        try:
            await agent.run(task)
            assert not fails, "the model's error did not reach the app"
        except openai.InternalServerError:
            assert fails, "the run failed"
        assert [step.cls for step in model_calls] == classes, (model_calls, classes)
        for step in model_calls + tool_calls:
            run.add(step)
        model_calls.clear()
        tool_calls.clear()

    async def runs() -> None:
        # one event loop for every run: the LLM's and the tools' clients keep their
        # connections on it

        # Run 0: no span of the app's own (FunctionAgent.run is the root); a tool, then the
        # answer. In a task with a fresh context, as a new request would have.
        script_model({"do": "tool_call", "name": "lookup_invoice",
                      "arguments": {"invoice_id": 9}},
                     {"do": "ok", "text": "paid"})

        async def unwrapped() -> None:
            with truth.run(SERVICE, None, note="no root of the app's own; completes") as run:
                await attempt(run, "was invoice 9 paid?", ["ok", "ok"], fails=False)
        await asyncio.create_task(unwrapped(), context=contextvars.Context())

        # Run 1: the app's root with a budget; the tool's timeout leaves it (the model is
        # told), then the model answers 503 and the run raises.
        script_model({"do": "tool_call", "name": "fetch_report",
                      "arguments": {"report_id": 8}},
                     {"do": "status", "code": 503})
        with truth.run(SERVICE, 10_000, note="a tool's timeout, then model 503") as run, \
                root_span(tracer, run, "support request", {"budget.total_ms": 10_000}) as root:
            run.trace_id = trace_id_of(root)
            await attempt(run, "summarise report 8", ["ok", "upstream_error"], fails=True)

        # Run 2: exhausted. A slow 2xx model call (0.2 s) is the culprit; the tool that
        # follows times out (0.3 s) and holds the deadline; the model then answers.
        script_model({"do": "slow", "seconds": 0.2,
                      "then": {"do": "tool_call", "name": "fetch_report",
                               "arguments": {"report_id": 8}}},
                     {"do": "ok", "text": "late"})
        with truth.run(SERVICE, RUN_2_BUDGET_MS, note="slow model call the culprit, a "
                       "timed-out tool holds the deadline") as run, \
                root_span(tracer, run, "support request",
                          {"budget.total_ms": RUN_2_BUDGET_MS}) as root:
            run.trace_id = trace_id_of(root)
            await attempt(run, "summarise report 8", ["ok", "ok"], fails=False)
        await tools_http.aclose()

    asyncio.run(runs())
    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
