"""The spans that stock OpenTelemetry instrumentation records for a simulated call.

The instrumented agents' budget spans are budgetscope_sdk's own (`runs.py`). What is built here
is what other libraries record: every agent's HTTP/gRPC client spans, and the whole trace of the
plain agent (triage-agent), which carries only gen_ai.*, http.*, rpc.*, error.type, exception
events and span status, so the ingest has to infer everything else.
"""

from __future__ import annotations

from functools import cache

from . import usage
from .agents import TOOLSPECS
from .attempts import Attempt, PlayedRun
from .spans import (
    KIND_CLIENT,
    KIND_INTERNAL,
    SCOPE_GRPC,
    SCOPE_HTTP,
    SCOPE_MODEL,
    SCOPE_PLAIN,
    STATUS_ERROR,
    AttrValue,
    Event,
    Resource,
    Span,
)

NS = 1_000_000
GRPC_NAMES = {0: "OK", 1: "CANCELLED", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
               8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 10: "ABORTED", 13: "INTERNAL",
               14: "UNAVAILABLE"}
MODEL_ERRORS = {429: "RateLimitError", 500: "InternalServerError", 503: "APIStatusError"}


@cache
def resource(service: str, version: str, instance: int) -> Resource:
    return Resource((
        ("service.name", service),
        ("service.namespace", "agents"),
        ("service.version", version),
        ("service.instance.id", f"{service}-{instance}"),
        ("deployment.environment.name", "production"),
        ("telemetry.sdk.language", "python"),
        ("telemetry.sdk.name", "opentelemetry"),
        ("telemetry.sdk.version", "1.28.2"),
    ))


def _identity(a: Attempt) -> tuple[str, int, dict[str, AttrValue]]:
    """Span name, kind and the gen_ai attributes of the step."""
    name = a.call.name
    if a.kind == "model":
        return f"chat {name}", KIND_CLIENT, {"gen_ai.operation.name": "chat",
                                              "gen_ai.provider.name": "openai",
                                              "gen_ai.request.model": name}
    if a.kind == "subagent":
        return f"invoke_agent {name}", KIND_INTERNAL, {"gen_ai.operation.name": "invoke_agent",
                                                        "gen_ai.agent.name": name}
    if a.kind == "queue":
        return f"queue {name}", KIND_INTERNAL, {}
    return f"execute_tool {name}", KIND_INTERNAL, {"gen_ai.operation.name": "execute_tool",
                                                    "gen_ai.tool.name": name}


def _grpc_status(sim: PlayedRun, attrs: dict[str, AttrValue], code: int) -> None:
    # Newer gRPC instrumentation reports the status by name (docs/metrics.md §3 rule 3).
    if not sim.instrumented and sim.new_rpc_semconv:
        attrs["rpc.response.status_code"] = GRPC_NAMES[code]
    else:
        attrs["rpc.grpc.status_code"] = code


def _failure_attrs(sim: PlayedRun, a: Attempt, span: Span) -> None:
    """Conventional error attributes, set by instrumented and plain agents alike."""
    attrs = span.attrs
    spec = TOOLSPECS.get(a.call.name)
    grpc = spec is not None and spec.transport == "grpc" and a.kind != "subagent"
    if a.outcome == "client_timeout":
        span.status, span.message = STATUS_ERROR, f"{a.call.name}: deadline of {a.allocated_ms} ms"
        error = "APITimeoutError" if a.kind == "model" else "TimeoutError"
        if grpc and not sim.instrumented:
            _grpc_status(sim, attrs, 4)
        elif not sim.instrumented and a.nat.u < 0.3:
            error = "httpx.ReadTimeout"  # only the exception event says what happened
        else:
            attrs["error.type"] = error
        span.events.append(_exception(a.resp_ns, error, span.message))
    elif a.outcome == "cancelled":
        attrs["error.type"] = "asyncio.CancelledError"
        if a.user_cancel:
            span.status, span.message = STATUS_ERROR, "cancelled by user"
    elif a.nat.failure is not None and a.outcome in ("upstream_error", "client_error"):
        failure = a.nat.failure
        span.status, span.message = STATUS_ERROR, failure.message
        if failure.http_status is not None:
            attrs["http.response.status_code"] = failure.http_status
            attrs["error.type"] = (MODEL_ERRORS.get(failure.http_status, failure.error_type)
                                   if a.kind == "model" else failure.error_type)
        elif failure.grpc_code is not None:
            _grpc_status(sim, attrs, failure.grpc_code)
            attrs["error.type"] = failure.error_type
        span.events.append(_exception(a.resp_ns, str(attrs["error.type"]), failure.message))


def _exception(t_ns: int, error: str, message: str) -> Event:
    return Event(t_ns, "exception", {"exception.type": error, "exception.message": message})


def step_span(sim: PlayedRun, a: Attempt, span_id: bytes, parent_id: bytes,
              billed: usage.Usage | None = None) -> Span | None:
    """The plain agent's step, as its framework's instrumentation records it (with the usage
    an answered model call billed)."""
    # Plain instrumentation has no notion of refusals, queue waits or backoff sleeps.
    if a.kind == "queue" or a.outcome == "refused":
        return None
    name, kind, attrs = _identity(a)
    scope = SCOPE_MODEL if a.kind == "model" else SCOPE_PLAIN
    span = Span(span_id, parent_id, name, kind, a.start_ns, a.end_ns, scope, attrs)
    if billed is not None:
        attrs.update(usage.attributes(billed))
    _failure_attrs(sim, a, span)
    return span


def transport_span(sim: PlayedRun, a: Attempt, parent_id: bytes) -> Span | None:
    """The HTTP or gRPC client span the library instrumentation records inside a tool call."""
    spec = TOOLSPECS.get(a.call.name)
    if a.kind in ("model", "subagent", "queue") or spec is None or spec.transport == "none":
        return None
    answered = a.outcome not in ("client_timeout", "cancelled")
    end = a.resp_ns - 80_000 if answered else a.resp_ns + 200_000
    # Inside its step: starts once the call is dispatched, ends before the step's cleanup.
    end = max(min(end, a.end_ns), a.start_ns)
    start = min(a.start_ns + 250_000, end)
    span_id = sim.sid(a.call.idx, a.attempt, a.branch, a.kind, "client")
    failure = a.nat.failure if a.outcome in ("upstream_error", "client_error") else None
    if spec.transport == "http":
        attrs: dict[str, AttrValue] = {"http.request.method": spec.method,
                                       "server.address": spec.server,
                                       "url.full": f"https://{spec.server}{spec.route}"}
        span = Span(span_id, parent_id, spec.method, KIND_CLIENT, start, end, SCOPE_HTTP, attrs)
        if answered:
            status = failure.http_status if failure and failure.http_status else (
                201 if spec.method == "POST" else 200)
            attrs["http.response.status_code"] = status
            if status >= 400:
                attrs["error.type"] = str(status)
                span.status = STATUS_ERROR
        else:
            attrs["error.type"] = "TimeoutError" if a.outcome == "client_timeout" else (
                "asyncio.CancelledError")
            span.status = STATUS_ERROR
        return span
    service, method = spec.route.split("/")
    attrs = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method,
             "server.address": spec.server}
    span = Span(span_id, parent_id, spec.route, KIND_CLIENT, start, end, SCOPE_GRPC, attrs)
    code = failure.grpc_code if failure and failure.grpc_code else 0
    if not answered:
        code = 4 if a.outcome == "client_timeout" else 1
    _grpc_status(sim, attrs, code)
    if code:
        span.status, span.message = STATUS_ERROR, GRPC_NAMES[code]
    return span


def root_span(sim: PlayedRun, span_id: bytes, end_ns: int, outcome: str) -> Span:
    attrs: dict[str, AttrValue] = {"gen_ai.operation.name": "invoke_agent",
                                   "gen_ai.agent.name": sim.agent.name}
    # The framework declares the run's budget; nothing records how the run ended.
    if sim.total_ms is not None:
        attrs["budget.total_ms"] = sim.total_ms
        if sim.deadline_ms is not None:
            attrs["budget.deadline_unix_ms"] = sim.deadline_ms
    span = Span(span_id, b"", f"invoke_agent {sim.agent.name}", KIND_INTERNAL, sim.start_ns,
                end_ns, SCOPE_PLAIN, attrs)
    if outcome in ("failed", "exhausted", "cancelled"):
        span.status = STATUS_ERROR
        span.message = {"failed": "agent failed", "exhausted": "run deadline exceeded",
                        "cancelled": "cancelled by user"}[outcome]
        error = {"failed": sim.fail_type or "error", "exhausted": "DeadlineExceeded",
                 "cancelled": "asyncio.CancelledError"}[outcome]
        attrs["error.type"] = error
    return span
