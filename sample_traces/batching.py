"""Batch spans the way an SDK's BatchSpanProcessor exports them.

Spans reach the exporter when they end (children before parents). Each resource (one agent
process) has its own buffer, exported when it holds 512 spans or when its 5 s schedule delay has
passed; an export is one ExportTraceServiceRequest with one scopeSpans per instrumentation scope.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .spans import Resource, Run, Span

MAX_BATCH = 512
SCHEDULE_DELAY_NS = 5_000_000_000


@dataclass(slots=True)
class Batch:
    """One export: spans of one resource, as (trace_id, span) in export order."""

    resource: Resource
    spans: list[tuple[bytes, Span]] = field(default_factory=list)
    opened_ns: int = 0

    def by_scope(self) -> list[tuple[tuple[str, str], list[tuple[bytes, Span]]]]:
        groups: dict[tuple[str, str], list[tuple[bytes, Span]]] = {}
        for trace_id, span in self.spans:
            groups.setdefault(span.scope, []).append((trace_id, span))
        return list(groups.items())  # first-seen scope order: deterministic


class _Exporter:
    """Per-resource buffers with the BatchSpanProcessor's size and time triggers."""

    def __init__(self, schedule_delay_ns: int = SCHEDULE_DELAY_NS) -> None:
        self.buffers: dict[Resource, Batch] = {}
        self.delay = schedule_delay_ns

    def add(self, resource: Resource, trace_id: bytes, span: Span) -> Iterator[Batch]:
        batch = self.buffers.get(resource)
        if batch is not None and span.end_ns >= batch.opened_ns + self.delay:
            yield self.buffers.pop(resource)
            batch = None
        if batch is None:
            batch = self.buffers[resource] = Batch(resource, opened_ns=span.end_ns)
        batch.spans.append((trace_id, span))
        if len(batch.spans) >= MAX_BATCH:
            yield self.buffers.pop(resource)

    def due(self, now_ns: int) -> Iterator[Batch]:
        """Buffers whose timer fired before `now_ns`, in the order they fired."""
        fired = [(b.opened_ns, i, key) for i, (key, b) in enumerate(self.buffers.items())
                 if b.opened_ns + self.delay <= now_ns]
        for _, _, key in sorted(fired, key=lambda f: f[:2]):
            yield self.buffers.pop(key)

    def drain(self) -> Iterator[Batch]:
        yield from self.due(2**63)


def batch_runs(runs: Iterable[Run], schedule_delay_ns: int = SCHEDULE_DELAY_NS
               ) -> Iterator[Batch]:
    """Interleave concurrent runs' spans by end time and batch them per resource.

    A long `schedule_delay_ns` fills every batch to 512 spans, as a Collector's batch processor
    in front of a file exporter does; benchmarks use it.

    Runs arrive in start order and every span ends after its run started, so a span ending
    before the next run's start can be exported: memory stays bounded by the runs in flight.
    """
    pending: list[tuple[int, int, Resource, bytes, Span]] = []
    exporter = _Exporter(schedule_delay_ns)
    seq = 0
    for run in runs:
        yield from _release(pending, exporter, run.start_ns)
        for span in sorted(run.spans, key=lambda s: s.end_ns):
            heapq.heappush(pending, (span.end_ns, seq, run.resource, run.trace_id, span))
            seq += 1
    yield from _release(pending, exporter, 2**63)
    yield from exporter.drain()


def _release(pending: list, exporter: _Exporter, now_ns: int) -> Iterator[Batch]:
    while pending and pending[0][0] <= now_ns:
        end_ns, _, resource, trace_id, span = heapq.heappop(pending)
        yield from exporter.due(end_ns)
        yield from exporter.add(resource, trace_id, span)
    if now_ns < 2**63:
        yield from exporter.due(now_ns)
