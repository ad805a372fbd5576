"""OTLP requests for load and for the error paths: built field by field (raw_request), or a run
made by the OpenTelemetry SDK with a budget.* attribute set to any value (budget_run, which the
fuzz harness of tests/support/ also sends)."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def raw_request(spans: int, *, bad_trace_ids: int = 0, seed: bytes | None = None
                ) -> ExportTraceServiceRequest:
    """A request of `spans` spans with random ids, the first `bad_trace_ids` with a 15-byte
    trace id (which OTLP requires to be 16)."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "raw-client"
    scope_spans = resource_spans.scope_spans.add()
    trace_id = seed or os.urandom(16)
    for index in range(spans):
        span = scope_spans.spans.add()
        span.trace_id = trace_id[:15] if index < bad_trace_ids else trace_id
        span.span_id = os.urandom(8)
        span.name = f"span {index}"
        span.start_time_unix_nano = 1_764_000_000_000_000_000 + index
        span.end_time_unix_nano = span.start_time_unix_nano + 1_000_000
    return request


RUN_BUDGET_KEYS = frozenset({"budget.total_ms", "budget.deadline_unix_ms", "budget.reserve_ms"})


def budget_run(key: str, value: Any, start_ns: int) -> list[ReadableSpan]:
    """One run made by the OpenTelemetry SDK: a root with a budget and a tool step; `key`
    carries `value` (on the root for run keys, on the step otherwise)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "fuzzed-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("budgetscope.fuzz")
    run_attributes: dict[str, Any] = {"budget.total_ms": 2_000}
    step_attributes: dict[str, Any] = {"budget.step.kind": "tool", "budget.step.name": "fetch",
                                       "budget.allocated_ms": 1_000}
    (run_attributes if key in RUN_BUDGET_KEYS else step_attributes)[key] = value
    root = tracer.start_span("run", attributes=run_attributes, start_time=start_ns)
    step = tracer.start_span("fetch", context=trace.set_span_in_context(root),
                             attributes=step_attributes, start_time=start_ns + 10**8)
    step.end(end_time=start_ns + 9 * 10**8)
    root.end(end_time=start_ns + 10**9)
    provider.shutdown()
    return list(exporter.get_finished_spans())
