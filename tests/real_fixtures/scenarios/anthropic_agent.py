"""An agent written by hand on the Anthropic Python SDK (≥ 2.17), which traces its own API calls:
one CLIENT span `anthropic.messages.create` per call (scope com.anthropic.sdk.python,
gen_ai.operation.name = chat), on by default (ANTHROPIC_OPEN_TELEMETRY unset) and needing only
opentelemetry-api and a global tracer provider. Its tools are its own functions with an
`execute_tool` span each, as the GenAI conventions suggest, recording a failure's `error.type`.

    anthropic_agent.py alone           the SDK's own spans only
    anthropic_agent.py openllmetry     + OpenLLMetry's opentelemetry-instrumentation-anthropic
    anthropic_agent.py openinference   + OpenInference's anthropic instrumentor

Every mode makes the same calls, so one call is one model step in each truth however many spans
the instrumentations give it (docs/conventions.md, "one call, two spans")."""

from __future__ import annotations

import asyncio
import sys
import urllib.request
from typing import Any

import anthropic
from harness import (
    CLIENT_TIMEOUT_S,
    GENEROUS_TIMEOUT_S,
    TOOL_URL,
    Run,
    Truth,
    root_span,
    script_model,
    trace_id_of,
    tracer_provider,
)
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

MODEL = "claude-sonnet-4-5"
SERVICE = "anthropic-agent"  # the resource's service.name: no span names an agent
MESSAGES = [{"role": "user", "content": "summarise report 7"}]
PACKAGES = {
    "alone": ["anthropic", "opentelemetry-api", "opentelemetry-sdk",
              "opentelemetry-exporter-otlp-proto-http"],
    "openllmetry": ["anthropic", "opentelemetry-instrumentation-anthropic", "opentelemetry-api",
                    "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"],
    "openinference": ["anthropic", "openinference-instrumentation-anthropic",
                      "opentelemetry-api", "opentelemetry-sdk",
                      "opentelemetry-exporter-otlp-proto-http"],
}


def instrument(mode: str, provider: Any) -> None:
    if mode == "openllmetry":
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

        AnthropicInstrumentor().instrument(tracer_provider=provider)
    elif mode == "openinference":
        from openinference.instrumentation import TraceConfig
        from openinference.instrumentation.anthropic import AnthropicInstrumentor as OIAnthropic

        # inputs and outputs hidden (OpenInference's own switches): the spans would carry the
        # conversation, and nothing in them is read by docs/conventions.md
        OIAnthropic().instrument(tracer_provider=provider, config=TraceConfig(
            hide_inputs=True, hide_outputs=True, hide_input_messages=True,
            hide_output_messages=True))


def seen_class(error: BaseException | None) -> str:
    """The class of what the SDK raised, from the exception the harness caught."""
    if error is None:
        return "ok"
    if isinstance(error, anthropic.APITimeoutError):
        return "client_timeout"
    if isinstance(error, anthropic.APIStatusError) and (
            error.status_code >= 500 or error.status_code == 429):
        return "upstream_error"
    # an `error` event in a stream that opened with 200: the API's own envelope says what
    if isinstance(error, anthropic.APIStatusError) and isinstance(error.body, dict) and (
            error.body.get("error", {}).get("type") in ("overloaded_error", "api_error")):
        return "upstream_error"
    raise error


def main() -> None:
    mode = sys.argv[1]
    provider = tracer_provider(SERVICE)
    instrument(mode, provider)
    tracer = trace.get_tracer("support-agent")
    truth = Truth(f"anthropic_{mode}" if mode != "alone" else "anthropic", PACKAGES[mode])
    client = anthropic.Anthropic(max_retries=0, timeout=GENEROUS_TIMEOUT_S)

    def chat(run: Run, cls: str, call: str, timeout: float = GENEROUS_TIMEOUT_S) -> None:
        with run.step("model", MODEL, cls, call):
            error = None
            try:
                client.messages.create(model=MODEL, max_tokens=256, messages=MESSAGES,
                                       timeout=timeout)
            except anthropic.APIError as caught:
                error = caught
        assert seen_class(error) == cls, (call, error)

    def stream(run: Run, cls: str, call: str) -> None:
        with run.step("model", MODEL, cls, call):
            error = None
            try:
                with client.messages.stream(model=MODEL, max_tokens=256,
                                            messages=MESSAGES) as events:
                    events.get_final_message()
            except anthropic.APIError as caught:
                error = caught
        assert seen_class(error) == cls, (call, error)

    def tool(run: Run, name: str, method: str, path: str, cls: str, write: bool = False,
             timeout: float = GENEROUS_TIMEOUT_S) -> None:
        """The app's own tool call: an execute_tool span around a plain urllib request (no HTTP
        instrumentation here); the tool catches its own timeout, returns a text to the model,
        and records the failure on its span the way the GenAI conventions say (error.type)."""
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.name": name}
        if write:
            attributes["budget.side_effect"] = "write"
        with run.step("tool", name, cls, f"{method} {path}",
                      side_effect="write" if write else None, declared_write=write), \
                tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes) \
                as span:
            request = urllib.request.Request(TOOL_URL + path, method=method,
                                             data=b"{}" if write else None)
            try:
                status = urllib.request.urlopen(request, timeout=timeout).status
            except TimeoutError as error:
                span.set_attribute("error.type", type(error).__qualname__)
                span.set_status(Status(StatusCode.ERROR, str(error)))
                status = "timeout"
        expected = {"client_timeout": "timeout", "ok": 201 if write else 200}[cls]
        assert status == expected, (path, status)

    # Run 0: a bare model call with no span of the app's own (alone: the SDK's span is the
    # trace root, a run that is its own single model step).
    if mode != "openllmetry":
        with truth.run(SERVICE, None, note="model call with no root of its own") as run:
            chat(run, "ok", "messages.create (no app span)")
    else:
        # OpenLLMetry starts its span without making it current, so with no root of the app's
        # own the SDK's span would be the root of a second trace: one call, two runs. Every run
        # here has a root of the app's own.
        truth.notes.append("no bare call: OpenLLMetry's span is not current, so the SDK's own "
                           "span of a bare call would start a trace of its own")

    # Run 1: within budget; every answer the fake can give, each caught by the app, which goes
    # on: tool_use, a tool, 503, 429, 529 overloaded_error, a client timeout, a slow 2xx, the
    # answer, a write.
    # The slow 2xx bills a large fresh input beside a smaller cache read: Anthropic's
    # input_tokens (2,400) is then more than its cache (1,536), so a reader that cannot tell
    # whether a span's input includes the cache would take it as included.
    script_model({"do": "tool_call", "name": "fetch_report", "arguments": {"id": 7}},
                 {"do": "status", "code": 503}, {"do": "status", "code": 429},
                 {"do": "status", "code": 529}, {"do": "slow"},
                 {"do": "slow", "seconds": 0.2, "usage": {
                     "input_tokens": 2_400, "cache_read_input_tokens": 1_536,
                     "cache_creation_input_tokens": 0}},
                 {"do": "ok", "text": "done"})
    with truth.run(SERVICE, 10_000, note="every answer: 503, 429, 529, timeout, slow 2xx") \
            as run, root_span(tracer, run, "support request", {"budget.total_ms": 10_000}) \
            as root:
        run.trace_id = trace_id_of(root)
        chat(run, "ok", "messages.create → tool_use fetch_report")
        tool(run, "fetch_report", "GET", "/ok", "ok")
        chat(run, "upstream_error", "messages.create → 503 api_error")
        chat(run, "upstream_error", "messages.create → 429 rate_limit_error")
        chat(run, "upstream_error", "messages.create → 529 overloaded_error")
        chat(run, "client_timeout", "messages.create → slow, client timeout 0.3 s",
             timeout=CLIENT_TIMEOUT_S)
        chat(run, "ok", "messages.create → 2xx after 0.2 s")
        chat(run, "ok", "messages.create → answer")
        tool(run, "create_ticket", "POST", "/write", "ok", write=True)

    # Run 2: exhausted. A slow 2xx model call (0.2 s, some 250 ms with the SDK's own work) is
    # the culprit; the tool that follows times out (0.3 s, caught by the tool) and holds the
    # deadline (350 ms, some 100 ms into the tool).
    script_model({"do": "slow", "seconds": 0.2,
                  "then": {"do": "tool_call", "name": "fetch_report", "arguments": {"id": 8}}},
                 {"do": "ok", "text": "late"})
    with truth.run(SERVICE, 350, note="slow model call is the culprit, a timed-out tool holds "
                   "the deadline") as run, \
            root_span(tracer, run, "support request", {"budget.total_ms": 350}) as root:
        run.trace_id = trace_id_of(root)
        chat(run, "ok", "messages.create → tool_use after 0.2 s")
        tool(run, "fetch_report", "GET", "/slow", "client_timeout", timeout=CLIENT_TIMEOUT_S)
        chat(run, "ok", "messages.create → answer")

    # Runs 3 and 4: two parallel calls to the same model from one client (asyncio.gather), two
    # steps each time. The second starts 50 ms after the first, so that no two steps tie to the
    # microsecond: in run 3 it ends after the first (the intervals overlap), in run 4 before it
    # (its interval lies inside the first one's: beside a second instrumentation, the outer span
    # of the first call then also contains both spans of the second).
    async def parallel(run: Run, first: float, second: float) -> None:
        # one client per event loop: its connection pool belongs to the loop it ran on
        async_client = anthropic.AsyncAnthropic(max_retries=0, timeout=GENEROUS_TIMEOUT_S)

        async def one(delay: float, seconds: float, call: str) -> None:
            await asyncio.sleep(delay)
            with run.step("model", MODEL, "ok", call):
                await async_client.messages.create(model=MODEL, max_tokens=256,
                                                   messages=MESSAGES)

        await asyncio.gather(
            one(0, first, f"messages.create → 2xx after {first} s (parallel)"),
            one(0.05, second, f"messages.create → 2xx after {second} s, 50 ms later (parallel)"))

    for first, second, note in ((0.3, 0.45, "two parallel calls to one model, overlapping"),
                                (0.3, 0.1, "two parallel calls to one model, the second inside "
                                           "the first")):
        script_model({"do": "slow", "seconds": first}, {"do": "slow", "seconds": second})
        with truth.run(SERVICE, 10_000, note=note) as run, \
                root_span(tracer, run, "support request", {"budget.total_ms": 10_000}) as root:
            run.trace_id = trace_id_of(root)
            asyncio.run(parallel(run, first, second))

    # Run 5: two streamed calls (messages.stream). The first answers in full: its usage comes
    # in message_start and message_delta. The second overloads right after message_start: a
    # call that failed and was billed for its input all the same (docs/metrics.md §11.4).
    script_model({"do": "slow", "seconds": 0.2, "then": {"do": "ok", "text": "streamed answer"}},
                 {"do": "stream_error"})
    with truth.run(SERVICE, 10_000, note="streamed: an answer after 0.2 s, then an overload "
                   "after message_start") as run, \
            root_span(tracer, run, "support request", {"budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        stream(run, "ok", "messages.stream → answer after 0.2 s")
        stream(run, "upstream_error", "messages.stream → overloaded_error after message_start")

    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
