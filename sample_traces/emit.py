"""Turn simulated attempts into spans with the attributes of SPEC.md §2-§3.

Instrumented agents set the `budget.*` attributes; plain agents (triage-agent) only carry what
stock OpenTelemetry instrumentation records (gen_ai.*, http.*, rpc.*, error.type, exception
events, span status), so the ingest has to infer everything else.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from .agents import TOOLSPECS
from .spans import (
    KIND_CLIENT,
    KIND_INTERNAL,
    SCOPE_AGENT,
    SCOPE_GRPC,
    SCOPE_HTTP,
    SCOPE_MODEL,
    SCOPE_PLAIN,
    STATUS_ERROR,
    AttrValue,
    Event,
    Link,
    Resource,
    Span,
)

if TYPE_CHECKING:
    from .runs import Attempt, RunSim

NS = 1_000_000
GRPC_NAMES = {0: "OK", 1: "CANCELLED", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
               8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 10: "ABORTED", 13: "INTERNAL",
               14: "UNAVAILABLE"}
MODEL_ERRORS = {429: "RateLimitError", 500: "InternalServerError", 503: "APIStatusError"}
RESPONSE_MODEL = {"gpt-4o": "gpt-4o-2024-08-06", "gpt-4o-mini": "gpt-4o-mini-2024-07-18"}


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


def _agent_scope(sim: RunSim) -> tuple[str, str]:
    return SCOPE_AGENT if sim.instrumented else SCOPE_PLAIN


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


def _budget_attrs(a: Attempt, attrs: dict[str, AttrValue], hedge: bool) -> None:
    attrs["budget.step.kind"] = a.kind
    attrs["budget.step.name"] = a.call.name
    attrs["budget.remaining_ms"] = a.remaining_ms
    if a.cap_ms is not None:
        attrs["budget.cap_ms"] = a.cap_ms
    if a.allocated_ms is not None:
        attrs["budget.allocated_ms"] = a.allocated_ms
    attrs["budget.outcome"] = a.outcome
    if a.kind in ("tool", "reconcile") or a.attempt > 1:
        attrs["budget.attempt"] = max(a.attempt, 1)
    if hedge:
        attrs["budget.hedge"] = True
    if a.outcome in ("client_timeout", "cancelled"):
        attrs["budget.cleanup_ms"] = round((a.end_ns - a.resp_ns) / NS)


def _grpc_status(sim: RunSim, attrs: dict[str, AttrValue], code: int) -> None:
    # Newer gRPC instrumentation reports the status by name (SPEC §3 rule 3).
    if not sim.instrumented and sim.new_rpc_semconv:
        attrs["rpc.response.status_code"] = GRPC_NAMES[code]
    else:
        attrs["rpc.grpc.status_code"] = code


def _failure_attrs(sim: RunSim, a: Attempt, span: Span) -> None:
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


def step_span(sim: RunSim, a: Attempt, span_id: bytes, parent_id: bytes, *, hedge: bool,
              write_key: str | None, effect: str | None,
              reconcile: tuple[str, str | None] | None, link_to: bytes | None) -> Span | None:
    # Plain instrumentation has no notion of refusals, queue waits or backoff sleeps.
    if not sim.instrumented and (a.kind == "queue" or a.outcome == "refused"):
        return None
    name, kind, attrs = _identity(a)
    scope = SCOPE_MODEL if a.kind == "model" else _agent_scope(sim)
    span = Span(span_id, parent_id, name, kind, a.start_ns, a.end_ns, scope, attrs)
    if sim.instrumented:
        _budget_attrs(a, attrs, hedge)
        if a.kind in ("tool", "reconcile"):
            attrs["budget.side_effect"] = "write" if write_key else "read"
        if write_key:
            attrs["budget.idempotency_key"] = write_key
            attrs["budget.effect_status"] = effect or "none"
        if reconcile:
            attrs["budget.reconcile.result"] = reconcile[0]
            if reconcile[1]:
                attrs["budget.idempotency_key"] = reconcile[1]
    if link_to is not None:
        span.links.append(Link(sim.trace_id, link_to))
    if a.kind == "model" and a.outcome == "ok":
        attrs["gen_ai.response.model"] = RESPONSE_MODEL[a.call.name]
        attrs["gen_ai.usage.input_tokens"] = a.call.input_tokens
        attrs["gen_ai.usage.output_tokens"] = a.nat.output_tokens
    _failure_attrs(sim, a, span)
    return span


def transport_span(sim: RunSim, a: Attempt, parent_id: bytes) -> Span | None:
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


def backoff_span(a: Attempt, span_id: bytes, parent_id: bytes, wake: int,
                 remaining_ms: int) -> Span:
    attrs: dict[str, AttrValue] = {
        "budget.step.kind": "backoff",
        "budget.step.name": a.call.name,
        "budget.remaining_ms": remaining_ms,
        "budget.attempt": a.attempt + 1,
        "budget.outcome": "ok",
    }
    return Span(span_id, parent_id, f"backoff {a.call.name}", KIND_INTERNAL, a.end_ns, wake,
                SCOPE_AGENT, attrs)


def root_span(sim: RunSim, span_id: bytes, end_ns: int, outcome: str) -> Span:
    attrs: dict[str, AttrValue] = {"gen_ai.operation.name": "invoke_agent",
                                   "gen_ai.agent.name": sim.agent.name}
    if sim.total_ms is not None:
        attrs["budget.total_ms"] = sim.total_ms
        if sim.deadline_ms is not None:
            attrs["budget.deadline_unix_ms"] = sim.deadline_ms
        if sim.instrumented:
            attrs["budget.reserve_ms"] = sim.reserve_ms
    if sim.instrumented:
        attrs["budget.run.outcome"] = outcome
    span = Span(span_id, b"", f"invoke_agent {sim.agent.name}", KIND_INTERNAL, sim.start_ns,
                end_ns, _agent_scope(sim), attrs)
    if outcome in ("failed", "exhausted", "cancelled"):
        span.status = STATUS_ERROR
        span.message = {"failed": "agent failed", "exhausted": "run deadline exceeded",
                        "cancelled": "cancelled by user"}[outcome]
        error = {"failed": sim.fail_type or "error", "exhausted": "DeadlineExceeded",
                 "cancelled": "asyncio.CancelledError"}[outcome]
        attrs["error.type"] = error
    return span
