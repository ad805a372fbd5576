"""Test traces made with the real OpenTelemetry SDK and stored through the real ingest path.

Times are given in milliseconds after T0 (Monday 2026-11-23 10:00:00 UTC, ISO week 2026-W48)
so that the hand-worked arithmetic in the tests reads in ms. Ids come from a seeded generator,
so the same test builds the same trace ids every time (golden files depend on it).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from ingest.decode.flatten import flatten_request
from store import SpanWriter, connect
from store.testing import PendingDerivations, refresh_touched, set_root_cutoff

T0_NS = 1_795_428_000 * 10**9  # 2026-11-23T10:00:00Z, a Monday
MS = 10**6


class SeededIds(IdGenerator):
    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.random.getrandbits(128) or 1


class TraceBuilder:
    """Makes finished spans; `span(...)` returns the span so that children can name it."""

    def __init__(self, seed: int = 1, service: str = "agent-svc") -> None:
        self.exporter = InMemorySpanExporter()
        self.providers: dict[str, TracerProvider] = {}
        self.ids = SeededIds(seed)
        self.default_service = service

    def _tracer(self, service: str, scope: str) -> trace.Tracer:
        if service not in self.providers:
            provider = TracerProvider(resource=Resource.create({"service.name": service}),
                                      id_generator=self.ids)
            provider.add_span_processor(SimpleSpanProcessor(self.exporter))
            self.providers[service] = provider
        return self.providers[service].get_tracer(scope)

    def span(self, name: str, start_ms: float, end_ms: float, *,
             parent: ReadableSpan | trace.Span | None = None,
             attributes: dict[str, Any] | None = None, error: bool = False,
             exceptions: Sequence[str] = (), links: Sequence[trace.Span] = (),
             service: str | None = None, t0_ns: int = T0_NS,
             kind: SpanKind = SpanKind.INTERNAL, status_message: str = "failed",
             ok: bool = False, scope: str = "budgetscope-tests",
             messages: Sequence[str] = ()) -> trace.Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        if parent is None:
            context = trace.set_span_in_context(trace.INVALID_SPAN)
        span = self._tracer(service or self.default_service, scope).start_span(
            name, context=context, attributes=attributes or {}, kind=kind,
            links=[Link(other.get_span_context()) for other in links],
            start_time=t0_ns + int(start_ms * MS))
        for index, exception_type in enumerate(exceptions):
            message = messages[index] if index < len(messages) else f"test {index}"
            span.add_event("exception", {"exception.type": exception_type,
                                         "exception.message": message},
                           timestamp=t0_ns + int(start_ms * MS))
        if error:
            span.set_status(Status(StatusCode.ERROR, status_message))
        elif ok:
            span.set_status(Status(StatusCode.OK))
        span.end(end_time=t0_ns + int(end_ms * MS))
        return span

    def run(self, start_ms: float, end_ms: float, budget_ms: int | None, **attributes: Any
            ) -> trace.Span:
        """A root run span; extra attributes use underscores for dots (`budget_run_outcome`)."""
        attrs = {key.replace("__", "\0").replace("_", ".").replace("\0", "_"): value
                 for key, value in attributes.items()}
        if budget_ms is not None:
            attrs["budget.total_ms"] = budget_ms
        return self.span("agent run", start_ms, end_ms, attributes=attrs)

    def step(self, parent: trace.Span, kind: str, name: str, start_ms: float, end_ms: float,
             **attributes: Any) -> trace.Span:
        attrs = {"budget.step.kind": kind, "budget.step.name": name, **attributes}
        return self.span(f"{kind} {name}", start_ms, end_ms, parent=parent, attributes=attrs)

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    @staticmethod
    def trace_id(span: trace.Span | ReadableSpan) -> str:
        return format(span.get_span_context().trace_id, "032x")

    @staticmethod
    def span_id(span: trace.Span | ReadableSpan) -> str:
        return format(span.get_span_context().span_id, "016x")


def open_db(tmp_path: Path, name: str = "test.duckdb") -> duckdb.DuckDBPyConnection:
    return connect(tmp_path / name)


def store(con: duckdb.DuckDBPyConnection, spans: Iterable[ReadableSpan],
          expected_refusals: frozenset[str] = frozenset(), *,
          roots_overdue: bool = False) -> int:
    """One OTLP request → one write, then the derivation of what it marked pending, as the
    receivers' writer thread does. Any refusal is an error, except the reasons a test names.
    `roots_overdue`: a trace whose root has not arrived is measured from its earliest span at once,
    as `ingest` does once its files are read (docs/conventions.md); else it waits, as in serve."""
    batch = flatten_request(encode_spans(list(spans)))
    unexpected = [r for r in batch.rejections if r.reason not in expected_refusals]
    assert not unexpected, unexpected
    inserted = SpanWriter(con).write(batch).inserted
    set_root_cutoff(con, datetime.now(UTC) + timedelta(seconds=1) if roots_overdue else None)
    PendingDerivations(refresh_touched).run(con)
    set_root_cutoff(con, None)
    return inserted


def run_row(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    cursor = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
    rows = cursor.fetchall()
    assert len(rows) == 1, f"{len(rows)} rows for run {run_id}"
    return dict(zip([d[0] for d in cursor.description], rows[0], strict=True))


def step_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, dict[str, Any]]:
    """The run's steps by span name (tests give each step a distinct name)."""
    cursor = con.execute("SELECT * FROM steps WHERE run_id = ? ORDER BY start_ns", [run_id])
    columns = [d[0] for d in cursor.description]
    rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    by_name = {row["span_name"]: row for row in rows}
    assert len(by_name) == len(rows), "step span names must be distinct in a test"
    return by_name
