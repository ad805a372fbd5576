"""An agent written by hand on the OpenAI Python client, instrumented by the official
opentelemetry-instrumentation-openai-v2 (model calls) and opentelemetry-instrumentation-httpx
(every HTTP request, the model's included). Its tools are its own functions, traced the way the
GenAI conventions suggest: an `execute_tool` span around the tool's HTTP call."""

from __future__ import annotations

import httpx
import openai
from harness import (
    CLIENT_TIMEOUT_S,
    MODEL_URL,
    TOOL_URL,
    Truth,
    root_span,
    script_model,
    trace_id_of,
    tracer_provider,
)
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

MODEL = "gpt-4o-mini"
AGENT = "support-agent"


def main() -> None:
    provider = tracer_provider("openai-v2-agent")
    OpenAIInstrumentor().instrument()
    HTTPXClientInstrumentor().instrument()
    tracer = trace.get_tracer("support-agent")
    truth = Truth("openai_v2", ["openai", "opentelemetry-instrumentation-openai-v2",
                                "opentelemetry-util-genai", "opentelemetry-instrumentation-httpx",
                                "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"])
    client = openai.OpenAI(base_url=MODEL_URL, max_retries=0, timeout=5)
    tools = httpx.Client(timeout=CLIENT_TIMEOUT_S)
    messages = [{"role": "user", "content": "summarise report 7"}]

    def chat(run, cls: str, call: str) -> None:
        with run.step("model", MODEL, cls, call):
            try:
                answer = client.chat.completions.create(model=MODEL, messages=messages)
                seen = "ok"
            except (openai.InternalServerError, openai.RateLimitError):
                seen = "upstream_error"
        assert seen == cls, (call, seen)
        if seen == "ok":
            remember(answer.choices[0].message)

    def remember(message) -> None:
        """The conversation grows as an agent's does: each answer and the next question go
        into the next call's input (which the provider then reads from its cache)."""
        messages.append({"role": "assistant", "content": message.content or "(tool call)"})
        messages.append({"role": "user", "content": "go on"})

    def chat_stream(run, call: str, include_usage: bool) -> None:
        options = {"stream_options": {"include_usage": True}} if include_usage else {}
        with run.step("model", MODEL, "ok", call):
            text = "".join(chunk.choices[0].delta.content or ""
                           for chunk in client.chat.completions.create(
                               model=MODEL, messages=messages, stream=True, **options)
                           if chunk.choices)
        messages.append({"role": "assistant", "content": text})
        messages.append({"role": "user", "content": "go on"})

    def tool(run, name: str, method: str, path: str, cls: str, write: bool = False) -> None:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        if write:
            attributes["budget.side_effect"] = "write"
        with run.step("tool", name, cls, f"{method} {path}",
                      side_effect="write" if write else None, declared_write=write), \
                tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes):
            # the agent catches the tool's failure and hands the model an error text, as most
            # hand-written agents do: the tool span stays UNSET, the evidence is in its child
            try:
                status = tools.request(method, TOOL_URL + path, json={"n": 1} if write else None
                                       ).status_code
            except httpx.TimeoutException:
                status = "timeout"
        expected = {"client_timeout": "timeout", "ok": 201 if write else 200}[cls]
        assert status == expected, (path, status)

    # Run 0: a bare model call with no span of the agent's own around it (pure
    # auto-instrumentation): its own run, one model step, no budget.
    with truth.run("openai-v2-agent", None, note="model call with no root of its own") as run:
        chat(run, "ok", "chat (no agent span)")

    # Run 1: exhausted; the deadline falls inside the tool call that times out.
    script_model({"do": "tool_call", "name": "fetch_report", "arguments": {"id": 7}},
                 {"do": "status", "code": 503}, {"do": "status", "code": 429},
                 {"do": "ok", "text": "report summarised"})
    with truth.run(AGENT, 250, note="deadline inside the timed-out fetch_report") as run, \
            root_span(tracer, run, f"invoke_agent {AGENT}", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT,
                "budget.total_ms": 250}) as root:
        run.trace_id = trace_id_of(root)
        chat(run, "ok", "chat → tool call fetch_report")
        tool(run, "fetch_report", "GET", "/slow", "client_timeout")
        chat(run, "upstream_error", "chat → 503")
        chat(run, "upstream_error", "chat → 429")
        chat(run, "ok", "chat → answer")
        tool(run, "create_ticket", "POST", "/write", "ok", write=True)

    # Run 2: within budget; the client's own retry turns a 503 into a success inside one
    # model call (two HTTP spans under it, the last a 200).
    retrying = openai.OpenAI(base_url=MODEL_URL, max_retries=1, timeout=5)
    script_model({"do": "status", "code": 503}, {"do": "ok", "text": "fine"})
    with truth.run(AGENT, 10_000, note="a 503 retried by the client inside one model call") \
            as run, root_span(tracer, run, f"invoke_agent {AGENT}", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT,
                "budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        with run.step("model", MODEL, "ok", "chat → 503, retried → 200"):
            retrying.chat.completions.create(model=MODEL, messages=messages)
        tool(run, "fetch_report", "GET", "/ok", "ok")

    # Run 3: two streamed calls. The first asks for the usage chunk
    # (stream_options.include_usage); the second does not, so nothing tells the client what the
    # fake billed for it: an unmetered model step that was billed (docs/metrics.md §11.4).
    script_model({"do": "slow", "seconds": 0.2,
                  "then": {"do": "ok", "text": "streamed with its usage"}},
                 {"do": "ok", "text": "streamed without its usage"})
    with truth.run(AGENT, 10_000, note="two streamed calls, with and without include_usage") \
            as run, root_span(tracer, run, f"invoke_agent {AGENT}", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT,
                "budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        chat_stream(run, "chat stream after 0.2 s, stream_options.include_usage",
                    include_usage=True)
        chat_stream(run, "chat stream, no usage asked for", include_usage=False)

    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
