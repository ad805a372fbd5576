"""Four span shapes that agent instrumentations give a call, reproduced with the OpenTelemetry
SDK around the real httpx instrumentation's client spans (docs/conventions.md;
docs/metrics.md §3 rule 6):

- a framework's wrapper exception: the tool's HTTP call times out (or gets a 503), and a
  framework span between the tool and the client re-raises it as its own ToolInvocationError,
  recorded after the client's span ended (rule 6 passes over it);
- an event record: after a failed call, an instrumentation built from a framework's events
  records the failure again as a 0 ms child span named `error` of the failed call, of the
  call's kind and with no name of its own;
- a model name set only on success: the model span reads the model name (and the usage the
  fake billed, as OpenInference's llm.token_count.*) from the response, so a call that failed
  carries none;
- a callable object's `__call__` as the tool name (`fetch_report.__call__`).

Every span is the app's own, made current as tracers do; the HTTP spans are the httpx
instrumentation's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpx
from harness import (
    CLIENT_TIMEOUT_S,
    GENEROUS_TIMEOUT_S,
    MODEL_URL,
    TOOL_URL,
    Run,
    Truth,
    root_span,
    script_model,
    trace_id_of,
    tracer_provider,
)
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.trace import SpanKind

SERVICE = "span-shapes-agent"
MODEL = "gpt-4o-mini"
OI = "openinference.span.kind"


class ToolInvocationError(Exception):
    """A framework's own error around whatever the tool raised (its text names no cause)."""


class fetch_report:  # noqa: N801 - a callable object named as the tool it is
    """A tool written as a callable object: an instrumentation names it by the method it ran."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def __call__(self, path: str) -> int:
        return self.client.get(TOOL_URL + path, timeout=GENEROUS_TIMEOUT_S).status_code


def openinference_usage(usage: dict[str, Any]) -> dict[str, int]:
    """The fake's billed `usage` as OpenInference's LLM spans report it (llm.token_count.*,
    read from the same response as the model name)."""
    return {"llm.token_count.prompt": usage["prompt_tokens"],
            "llm.token_count.completion": usage["completion_tokens"],
            "llm.token_count.total": usage["total_tokens"],
            "llm.token_count.prompt_details.cache_read":
                usage["prompt_tokens_details"]["cached_tokens"],
            "llm.token_count.completion_details.reasoning":
                usage["completion_tokens_details"]["reasoning_tokens"]}


def main() -> None:
    provider = tracer_provider(SERVICE)
    HTTPXClientInstrumentor().instrument()
    client = httpx.Client()
    tracer = trace.get_tracer("span-shapes")
    truth = Truth("span_shapes", ["opentelemetry-sdk", "opentelemetry-instrumentation-httpx",
                                  "httpx"])

    @contextmanager
    def app_run(note: str) -> Iterator[Run]:
        with truth.run(SERVICE, 10_000, note=note) as run, \
                root_span(tracer, run, "support request", {"budget.total_ms": 10_000}) as root:
            run.trace_id = trace_id_of(root)
            yield run

    def tool_span(name: str, **extra: Any) -> Any:
        return tracer.start_as_current_span(f"execute_tool {name}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, **extra})

    def invoked(path: str, timeout: float) -> None:
        """The framework's invocation of a tool's HTTP call: whatever the call raises leaves as
        a ToolInvocationError, recorded on the framework's span after the client's ended."""
        with tracer.start_as_current_span("ToolInvoker.invoke"):
            try:
                client.get(TOOL_URL + path, timeout=timeout).raise_for_status()
            except httpx.HTTPError as error:
                raise ToolInvocationError("the tool could not be invoked") from error

    def model_call(code: int, named_on_success: bool) -> None:
        """An LLM span (OpenInference's kind) whose model name is read from the response."""
        with tracer.start_as_current_span("Generator.run", attributes={OI: "LLM"}) as span:
            response = client.post(MODEL_URL + "/chat/completions",
                                   json={"model": MODEL, "messages": []},
                                   timeout=GENEROUS_TIMEOUT_S)
            assert response.status_code == code, response.status_code
            if named_on_success and response.is_success:
                answer = response.json()
                span.set_attribute("llm.model_name", answer["model"])
                span.set_attributes(openinference_usage(answer["usage"]))
            response.raise_for_status()

    # Run 1: a framework's wrapper exception around the tool's timeout, then around a 503. The
    # app catches what leaves the tool.
    with app_run("a wrapper exception recorded after the real timeout and 503") as run:
        for name, path, timeout, cls in (("fetch_report", "/slow", CLIENT_TIMEOUT_S,
                                          "client_timeout"),
                                         ("lookup_invoice", "/503", GENEROUS_TIMEOUT_S,
                                          "upstream_error")):
            with run.step("tool", name, cls, f"GET {path} inside ToolInvoker.invoke"):
                try:
                    with tool_span(name):
                        invoked(path, timeout)
                except ToolInvocationError:
                    pass
                else:
                    raise AssertionError(f"{path} did not fail")

    # Run 2: event records. A failed tool call and a failed model call, each followed by the
    # 0 ms `error` child an event handler records under it, of its kind, with no name.
    # (the model's 503 comes after 0.2 s: the culprit beyond doubt)
    script_model({"do": "slow", "seconds": 0.2, "then": {"do": "status", "code": 503}})
    with app_run("a 0 ms `error` child recorded under each failed call") as run:
        with run.step("tool", "lookup_invoice", "upstream_error", "GET /503"), \
                tool_span("lookup_invoice"):
            status = client.get(TOOL_URL + "/503", timeout=GENEROUS_TIMEOUT_S).status_code
            assert status == 503
            with tracer.start_as_current_span(
                    "error", attributes={"gen_ai.operation.name": "execute_tool"}) as child:
                child.set_status(trace.Status(trace.StatusCode.ERROR, "tool failed"))
        with run.step("model", MODEL, "upstream_error", "chat → 503"), \
                suppress(httpx.HTTPStatusError), \
                tracer.start_as_current_span("llm call", attributes={
                    OI: "LLM", "llm.model_name": MODEL}):
            response = client.post(MODEL_URL + "/chat/completions",
                                   json={"model": MODEL, "messages": []},
                                   timeout=GENEROUS_TIMEOUT_S)
            assert response.status_code == 503
            with tracer.start_as_current_span("error", attributes={OI: "LLM"}) as child:
                child.set_status(trace.Status(trace.StatusCode.ERROR, "llm failed"))
            response.raise_for_status()

    # Run 3: the model name set only on success: a 2xx names gpt-4o-mini, then a 503 names
    # nothing (its step takes the name the service's named spans of that span name carry).
    script_model({"do": "slow", "seconds": 0.2}, {"do": "status", "code": 503})
    with app_run("the model name only on a response") as run:
        with run.step("model", MODEL, "ok", "Generator.run → 2xx"):
            model_call(200, named_on_success=True)
        with run.step("model", MODEL, "upstream_error", "Generator.run → 503"), \
                suppress(httpx.HTTPStatusError):
            model_call(503, named_on_success=True)

    # Run 4: a callable object's method as the tool's name.
    tool = fetch_report(client)
    with app_run("a callable object named by its __call__") as run, \
            run.step("tool", "fetch_report", "ok", "GET /ok"), \
            tracer.start_as_current_span("execute_tool", kind=SpanKind.INTERNAL, attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": type(tool).__call__.__qualname__}):
        assert tool("/ok") == 200

    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
