"""Plain span records: what the simulation produces and the encoders consume."""

from __future__ import annotations

from dataclasses import dataclass, field

AttrValue = str | bool | int | float

KIND_INTERNAL = 1
KIND_CLIENT = 3
STATUS_UNSET = 0
STATUS_ERROR = 2

SCOPE_PLAIN = ("opentelemetry.instrumentation.langchain", "0.33.5")
SCOPE_MODEL = ("opentelemetry.instrumentation.openai_v2", "2.1b0")
SCOPE_HTTP = ("opentelemetry.instrumentation.httpx", "0.49b2")
SCOPE_GRPC = ("opentelemetry.instrumentation.grpc", "0.49b2")


@dataclass(slots=True)
class Event:
    time_ns: int
    name: str
    attrs: dict[str, AttrValue]


@dataclass(slots=True)
class Link:
    trace_id: bytes
    span_id: bytes
    attrs: dict[str, AttrValue] = field(default_factory=dict)


@dataclass(slots=True)
class Span:
    span_id: bytes
    parent_id: bytes  # b"" for a trace root
    name: str
    kind: int
    start_ns: int
    end_ns: int
    scope: tuple[str, str]
    attrs: dict[str, AttrValue]
    status: int = STATUS_UNSET
    message: str = ""
    events: list[Event] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)


@dataclass(frozen=True)
class Resource:
    attrs: tuple[tuple[str, AttrValue], ...]


@dataclass(slots=True)
class Run:
    index: int
    trace_id: bytes
    resource: Resource
    start_ns: int
    spans: list[Span]
