"""Span capture for the budget SDK's tests: a real OpenTelemetry SDK TracerProvider per test,
with an in-memory exporter, so each test reads back exactly the spans the SDK produced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer


@dataclass
class Captured:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    @property
    def tracer(self) -> Tracer:
        return self.provider.get_tracer("tests.sdk")

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def steps(self) -> list[dict[str, Any]]:
        """Each step span's attributes, in the order they ended."""
        return [dict(span.attributes or {}) for span in self.spans()
                if "budget.step.kind" in (span.attributes or {})]

    def run(self) -> ReadableSpan:
        runs = [span for span in self.spans() if "budget.total_ms" in (span.attributes or {})]
        assert len(runs) == 1, runs
        return runs[0]


def capture() -> Captured:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Captured(provider, exporter)
