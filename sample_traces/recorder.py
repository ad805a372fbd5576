"""Where the simulated runs' spans are recorded: the real OpenTelemetry SDK.

Every span goes through an OpenTelemetry SDK `TracerProvider` (one per resource, as each agent
process has its own) whose span processor collects the ended spans.
Instrumented agents record their steps through budgetscope_sdk (see `runs.py`); the spans that
other instrumentation libraries would record (the agent's httpx/gRPC client spans, the plain
agent's whole trace) are started on those libraries' tracers. The clock is the simulation's and
the ids come from a seeded generator, so the same seed gives the same spans.
"""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource as OtelResource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from .spans import Event, Link, Resource, Span

_KIND = {1: SpanKind.INTERNAL, 3: SpanKind.CLIENT}
_STATUS = {0: StatusCode.UNSET, 2: StatusCode.ERROR}
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)  # a parent that was not sampled drops its children


class SimClock:
    """The simulation's clock (budgetscope_sdk's Clock protocol) for one run, in integer
    nanoseconds. The harness sets it to the simulated instant of each call into the SDK.

    It is set, not only advanced, because a run's concurrent branches (parallel tool calls,
    hedges) are played one branch after another: the second branch starts before the first
    ended. Within a branch it only moves forward."""

    def __init__(self, origin_ns: int) -> None:
        self.origin_ns = origin_ns
        self.now_ns = origin_ns

    def set_ns(self, t_ns: int) -> None:
        self.now_ns = t_ns

    def monotonic(self) -> float:
        return (self.now_ns - self.origin_ns) / 1e9

    def wall_ns(self) -> int:
        return self.now_ns


class SeededIds(IdGenerator):
    """Ids decided by the simulation: the harness names the next span's id (derived from the
    span's role, so a step keeps its id under another policy) and each run's trace id."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.next_span: bytes | None = None

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        span_id, self.next_span = self.next_span, None
        # No id named means the harness lost track of a span: fail rather than go random.
        assert span_id is not None, "a span started without a simulated id"
        return int.from_bytes(span_id, "big")


class Collector(SpanProcessor):
    """Keeps ended spans in the order they ended, until the harness takes them.

    A span processor rather than a SimpleSpanProcessor and an exporter: the simple processor
    attaches a context per span to suppress instrumentation during an export that here is one
    list append, and that was a tenth of the generator's time."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def take(self) -> list[ReadableSpan]:
        out, self.spans = self.spans, []
        return out


class Recorder:
    """The TracerProviders of the simulated fleet and the spans they have ended."""

    def __init__(self) -> None:
        self.ids = SeededIds()
        self.collector = Collector()
        self._providers: dict[Resource, TracerProvider] = {}
        self._tracers: dict[tuple[Resource, str, str], trace.Tracer] = {}

    def tracer(self, resource: Resource, scope: tuple[str, str]) -> trace.Tracer:
        key = (resource, *scope)
        found = self._tracers.get(key)
        if found is None:
            provider = self._providers.get(resource)
            if provider is None:
                # Resource(...) rather than Resource.create: the agent's resource exactly, with
                # no attributes merged in from this process's environment.
                provider = TracerProvider(resource=OtelResource(dict(resource.attrs)),
                                          id_generator=self.ids, sampler=ALWAYS_ON)
                provider.add_span_processor(self.collector)
                self._providers[resource] = provider
            found = self._tracers[key] = provider.get_tracer(scope[0], scope[1])
        return found

    def begin_run(self, trace_id: bytes) -> None:
        self.ids.trace_id = int.from_bytes(trace_id, "big")
        self.collector.take()

    def name_next(self, span_id: bytes) -> None:
        self.ids.next_span = span_id

    def replay(self, tracer: trace.Tracer, span: Span, trace_id: bytes) -> None:
        """Record a span another instrumentation library makes (an httpx client span, a plain
        agent's step) through its tracer, as that library would."""
        self.name_next(span.span_id)
        if span.parent_id:
            parent = SpanContext(int.from_bytes(trace_id, "big"),
                                 int.from_bytes(span.parent_id, "big"), is_remote=False,
                                 trace_flags=_SAMPLED)
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        else:
            context = otel_context.Context()
        links = [trace.Link(SpanContext(int.from_bytes(link.trace_id, "big"),
                                        int.from_bytes(link.span_id, "big"), is_remote=False),
                            link.attrs or None) for link in span.links]
        otel_span = tracer.start_span(span.name, context=context, kind=_KIND[span.kind],
                                      attributes=span.attrs, links=links or None,
                                      start_time=span.start_ns)
        for event in span.events:
            otel_span.add_event(event.name, event.attrs, timestamp=event.time_ns)
        if span.status:
            otel_span.set_status(Status(_STATUS[span.status], span.message or None))
        otel_span.end(end_time=span.end_ns)


def as_span(readable: ReadableSpan) -> Span:
    """An ended OpenTelemetry SDK span as the encoders' record (OTLP's enum numbering)."""
    context = readable.context
    parent = readable.parent
    status = readable.status
    code = status.status_code
    scope = readable.instrumentation_scope
    attributes = readable.attributes
    return Span(
        context.span_id.to_bytes(8, "big"),
        parent.span_id.to_bytes(8, "big") if parent is not None else b"",
        readable.name,
        readable.kind.value + 1,  # SpanKind counts from INTERNAL = 0; OTLP from UNSPECIFIED
        readable.start_time,
        readable.end_time,
        (scope.name, scope.version or "") if scope is not None else ("", ""),
        # BoundedAttributes.copy() is one dict copy; dict(...) would take its lock per key.
        attributes.copy() if isinstance(attributes, BoundedAttributes) else dict(attributes or {}),
        code.value if code is not StatusCode.UNSET else 0,
        (status.description or "") if code is StatusCode.ERROR else "",
        [Event(e.timestamp, e.name, dict(e.attributes or {})) for e in readable.events]
        if readable.events else [],
        [Link(link.context.trace_id.to_bytes(16, "big"), link.context.span_id.to_bytes(8, "big"),
              dict(link.attributes or {})) for link in readable.links]
        if readable.links else [],
    )
