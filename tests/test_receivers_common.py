"""Shared by the receiver tests: a real server on 127.0.0.1 (free ports) over a real database,
spans made by the real OpenTelemetry SDK, and hand-built requests for the error paths.

Kept as a module of helpers (it holds no tests) so both receiver test files use one server set-up.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ingest.receivers.limits import Limits
from ingest.receivers.service import ReceiverConfig, Receivers
from store import AfterWrite, DatabaseOwner

SMALL_LIMIT = 1024 * 1024  # bodies over 1 MiB are refused in these tests


@dataclass
class Running:
    owner: DatabaseOwner
    receivers: Receivers

    @property
    def http_url(self) -> str:
        return self.receivers.http.endpoint

    @property
    def grpc_target(self) -> str:
        return self.receivers.grpc.endpoint

    def count(self, sql: str = "SELECT count(*) FROM spans") -> int:
        cursor = self.owner.cursor()
        try:
            row = cursor.execute(sql).fetchone()
        finally:
            cursor.close()
        return int(row[0]) if row else 0


@contextmanager
def running_receivers(
    folder: Path, *, token: str | None = None, after_write: AfterWrite | None = None,
    max_lag_seconds: float = 5.0, commit_timeout: float = 30.0, body_timeout: float = 60.0,
    socket_timeout: float = 30.0,
) -> Iterator[Running]:
    owner = DatabaseOwner(folder / "receivers.duckdb")
    limits = Limits(max_body_bytes=SMALL_LIMIT, commit_timeout=commit_timeout,
                    body_timeout=body_timeout, socket_timeout=socket_timeout)
    config = ReceiverConfig(host="127.0.0.1", http_port=0, grpc_port=0, token=token,
                            limits=limits, max_lag_seconds=max_lag_seconds)
    receivers = Receivers(owner, config)
    receivers.committer.writer.after_write = after_write  # before any batch is written
    receivers.start()
    try:
        yield Running(owner, receivers)
    finally:
        receivers.stop(10)
        owner.close()


def sdk_spans(count: int, service: str = "agent-under-test") -> Sequence[ReadableSpan]:
    """`count` finished spans of one run (a root with budget.total_ms and tool-call children),
    made by the OpenTelemetry SDK itself."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("budgetscope.tests")
    with tracer.start_as_current_span("run", attributes={"budget.total_ms": 60_000}):
        for index in range(count - 1):
            with tracer.start_as_current_span(
                f"tool {index}", attributes={"gen_ai.operation.name": "execute_tool",
                                             "gen_ai.tool.name": "fetch_report"}):
                pass
    provider.shutdown()
    return memory.get_finished_spans()


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
