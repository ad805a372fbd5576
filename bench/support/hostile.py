"""Requests that keep a derivation busy, and what shows whether other runs wait behind it: a
hostile trace (a chain of nested runs), exception log records into it, and small canary runs.
bench_hostile_derivation times them; tests/store/test_derivation_bound.py bounds them."""

from __future__ import annotations

import os
import time
import urllib.request

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def hostile_trace(spans: int) -> tuple[ExportTraceServiceRequest, bytes, bytes]:
    """A chain of nested runs; returns the request, the trace id and its deepest span id."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    trace_id, parent, start = os.urandom(16), b"", time.time_ns() - 60 * 10**9
    for index in range(spans):
        span = scope.spans.add()
        span.trace_id, span.span_id, span.parent_span_id = trace_id, os.urandom(8), parent
        span.name, span.start_time_unix_nano = f"run {index}", start + index
        span.end_time_unix_nano = start + 10**9
        attribute = span.attributes.add()
        attribute.key, attribute.value.int_value = "budget.total_ms", 10_000
        parent = span.span_id
    return request, trace_id, parent


def canary() -> tuple[bytes, str]:
    """A small run (root and two steps, the root ended last); its body and trace id."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    trace_id, root_id, now = os.urandom(16), os.urandom(8), time.time_ns()
    for index, (name, parent) in enumerate((("step a", root_id), ("step b", root_id),
                                            ("canary run", b""))):
        span = scope.spans.add()
        span.trace_id, span.name = trace_id, name
        span.span_id = root_id if not parent else os.urandom(8)
        span.parent_span_id = parent
        span.start_time_unix_nano = now - 10**8 + index
        span.end_time_unix_nano = now
        if not parent:
            attribute = span.attributes.add()
            attribute.key, attribute.value.int_value = "budget.total_ms", 5_000
        else:
            attribute = span.attributes.add()
            attribute.key, attribute.value.string_value = "budget.step.kind", "tool"
    return request.SerializeToString(), trace_id.hex()


def exception_record(trace_id: bytes, span_id: bytes, number: int) -> bytes:
    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add()
    record.trace_id, record.span_id = trace_id, span_id
    record.time_unix_nano, record.severity_number = time.time_ns(), 17
    record.body.string_value = f"failed again ({number})"
    attribute = record.attributes.add()
    attribute.key, attribute.value.string_value = "exception.type", "ValueError"
    return request.SerializeToString()


def post(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/x-protobuf"})
    urllib.request.urlopen(request, timeout=60).read()
