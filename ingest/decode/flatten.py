"""ExportTraceServiceRequest → column lists for the spans, resources and scopes tables.

One pass over the protobuf objects; validation that refuses a single span (bad ids, impossible
timestamps) happens here so that every entry point (files, HTTP, gRPC) refuses the same things.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

from ingest.decode.any_value import (
    MAX_EVENTS,
    MAX_LINKS,
    MAX_NAME_CHARS,
    attributes_to_json,
    span_attributes_to_json,
)
from ingest.decode.bounded_cache import BoundedCache
from store import (
    CONVENTION_COLUMNS,
    CONVENTIONS,
    DENSE_TYPED_COLUMNS,
    EXCEPTION_EVENT,
    FlatBatch,
    RefusedValue,
    Rejection,
)

INT64_MAX = 2**63 - 1
UINT32_MAX = 2**32 - 1
MAX_SPAN_KIND, MAX_STATUS_CODE = 5, 2
# A span that starts further ahead than this is from a clock that is wrong, not from the future.
DEFAULT_MAX_FUTURE_NS = 24 * 3600 * 10**9
_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def locate(*parts: str) -> str:
    """'file.jsonl line 3, resource 0, scope 1, span 7': the non-empty parts, outermost first."""
    return ", ".join(part for part in parts if part)


def _digest(*parts: bytes) -> str:
    return hashlib.blake2b(b"\x00".join(parts), digest_size=8).hexdigest()


# Every request repeats its resource and scope; SDK exporters send a few spans per request, so
# converting them once per distinct value (keyed by their serialized bytes) saves real time.
# Bounded: cleared when it grows past _ROW_CACHE_LIMIT distinct entries. Receiver threads share
# it (ingest/decode/bounded_cache.py says why reads take no lock).
_ROW_CACHE_LIMIT = 4096
_row_cache: BoundedCache[tuple[str, bytes, str], tuple[str, tuple[Any, ...]]] = BoundedCache(
    _ROW_CACHE_LIMIT)


def _cached(kind: str, serialized: bytes, schema_url: str, build: Any) -> tuple[str, Any]:
    key = (kind, serialized, schema_url)
    row = _row_cache.get(key)
    if row is None:
        row = _row_cache.put(key, build(_digest(serialized, schema_url.encode())))
    return row


def resource_row(resource: Resource, schema_url: str) -> tuple[str, tuple[Any, ...]]:
    return _cached("resource", resource.SerializeToString(deterministic=True), schema_url,
                   lambda resource_id: _buildresource_row(resource_id, resource, schema_url))


def _buildresource_row(resource_id: str, resource: Resource, schema_url: str
                        ) -> tuple[str, tuple[Any, ...]]:
    attributes, dropped = attributes_to_json(resource.attributes)
    service = attributes.get("service.name")
    service_name = service if isinstance(service, str) else None
    row = (resource_id, service_name, dumps(attributes),
           resource.dropped_attributes_count + dropped, schema_url)
    return resource_id, row


def scope_row(scope: InstrumentationScope, schema_url: str) -> tuple[str, tuple[Any, ...]]:
    return _cached("scope", scope.SerializeToString(deterministic=True), schema_url,
                   lambda scope_id: _buildscope_row(scope_id, scope, schema_url))


def _buildscope_row(scope_id: str, scope: InstrumentationScope, schema_url: str
                     ) -> tuple[str, tuple[Any, ...]]:
    attributes, dropped = attributes_to_json(scope.attributes)
    row = (scope_id, scope.name, scope.version, dumps(attributes),
           scope.dropped_attributes_count + dropped, schema_url)
    return scope_id, row


def id_problem(trace_id: bytes, span_id: bytes, parent_span_id: bytes) -> str | None:
    if len(trace_id) != 16:
        return f"trace_id is {len(trace_id)} bytes, must be 16"
    if trace_id == _ZERO_TRACE_ID:
        return "trace_id is all zeros"
    if len(span_id) != 8:
        return f"span_id is {len(span_id)} bytes, must be 8"
    if span_id == _ZERO_SPAN_ID:
        return "span_id is all zeros"
    if parent_span_id and len(parent_span_id) != 8:
        return f"parent_span_id is {len(parent_span_id)} bytes, must be 8 or empty"
    return None


def time_problem(start: int, end: int, latest_start_ns: int) -> str | None:
    if start <= 0:
        return "start_time_unix_nano is 0" if start == 0 else "start time is negative"
    if start > INT64_MAX or end > INT64_MAX:
        return "timestamp beyond year 2262"
    if end < start:
        return f"ends before it starts (end {end} < start {start})"
    if start > latest_start_ns:
        return "starts in the future (more than the allowed clock skew ahead of now)"
    return None


def field_problem(flags: int, kind: int, status_code: int) -> str | None:
    """Values the stored columns cannot hold (flags UINTEGER, kind and status TINYINT): found
    by fuzzing, such a span failed its whole transaction instead of being refused alone."""
    if not 0 <= flags <= UINT32_MAX:
        return f"flags {flags} do not fit in 32 bits"
    if not 0 <= kind <= MAX_SPAN_KIND:
        return f"kind {kind} is not a SpanKind (0-{MAX_SPAN_KIND})"
    if not 0 <= status_code <= MAX_STATUS_CODE:
        return f"status code {status_code} is not a StatusCode (0-{MAX_STATUS_CODE})"
    return None


def refuse(batch: FlatBatch, name: str, problem: str, where: str) -> None:
    reason = ("bad_id" if "_id" in problem else "bad_field" if problem.startswith(
        ("flags", "kind", "status code")) else "bad_timestamp")
    batch.rejections.append(Rejection(reason, f"span {name!r} refused: {problem}", where))


def append_span(
    batch: FlatBatch, trace_id: bytes, span_id: bytes, parent_span_id: bytes,
    trace_state: str, flags: int, name: str, kind: int, start_ns: int, end_ns: int,
    status_code: int, status_message: str, resource_id: str, scope_id: str,
    service_name: str | None, attributes: dict[str, Any] | str, dropped_attributes: int,
    typed: dict[str, Any], events: list[dict[str, Any]], exception_types: list[str],
    dropped_events: int, links: list[dict[str, Any]], dropped_links: int, where: str = "",
) -> None:
    """One validated span as a row; shared by the protobuf and the OTLP JSON flatteners."""
    if typed:
        _report_refused_values(batch, name, typed, where)
    columns = batch.spans
    columns["trace_id"].append(trace_id.hex())
    columns["span_id"].append(span_id.hex())
    columns["parent_span_id"].append(parent_span_id.hex() or None)
    columns["trace_state"].append(trace_state)
    columns["flags"].append(flags)
    columns["name"].append(name)
    columns["kind"].append(kind)
    columns["start_ns"].append(start_ns)
    columns["end_ns"].append(end_ns)
    columns["status_code"].append(status_code)
    columns["status_message"].append(status_message)
    columns["resource_id"].append(resource_id)
    columns["scope_id"].append(scope_id)
    columns["service_name"].append(service_name)
    # The fast protobuf path (ingest/decode/proto_flatten.py) hands the JSON text already encoded.
    columns["attributes"].append(attributes if isinstance(attributes, str) else dumps(attributes))
    # Counts saturate: a sender's own count plus ours can pass the UINTEGER column's range.
    columns["dropped_attributes_count"].append(min(dropped_attributes, UINT32_MAX))
    columns["events"].append(events)
    columns["dropped_events_count"].append(min(dropped_events, UINT32_MAX))
    columns["links"].append(links)
    columns["dropped_links_count"].append(min(dropped_links, UINT32_MAX))
    for column in DENSE_TYPED_COLUMNS:
        columns[column].append(typed.get(column))
    columns["exception_types"].append(exception_types)
    # The convention columns (docs/conventions.md) stay sparse: 30 more appends a span cost 2 µs of
    # ingest's ~30. The span's own typed dict is handed over, not a copy of its convention entries
    # (the writer reads only those): copying cost every span a dict and a pass over its budget.*
    # values, ~1 µs, though most spans of the SDK's dialect carry no convention column at all.
    columns[CONVENTIONS].append(
        None if not typed or CONVENTION_COLUMNS.isdisjoint(typed) else typed)
    batch.span_count += 1


def _report_refused_values(batch: FlatBatch, name: str, typed: dict[str, Any],
                           where: str) -> None:
    """Empty the typed columns whose budget.* value is unusable (store/rows/typed_attributes.py)
    and say so; the span is kept, with the raw value in its attributes."""
    refused = [column for column, value in typed.items() if value.__class__ is RefusedValue]
    for column in refused:
        value = typed.pop(column)
        batch.rejections.append(Rejection(
            value.reason, f"span {name[:100]!r}: {value.problem}; stored without it (the raw "
            "value stays in its attributes)", where, 0))


def events_rows(span_events: Iterable[Span.Event]) -> tuple[list[dict[str, Any]], list[str]]:
    """A span's events as rows of its `events` column, and the exception types among them."""
    events: list[dict[str, Any]] = []
    exception_types: list[str] = []
    for event in span_events:
        attributes, dropped = attributes_to_json(event.attributes)
        events.append({
            "time_ns": min(event.time_unix_nano, INT64_MAX),
            "name": event.name[:MAX_NAME_CHARS],
            "attributes": dumps(attributes),
            "dropped_attributes_count": min(event.dropped_attributes_count + dropped,
                                            UINT32_MAX),
        })
        if event.name[:MAX_NAME_CHARS] == EXCEPTION_EVENT:
            exception_type = attributes.get("exception.type")
            if isinstance(exception_type, str) and exception_type:
                exception_types.append(exception_type)
    return events, exception_types


def links_rows(span_links: Iterable[Span.Link]) -> list[dict[str, Any]]:
    links: list[dict[str, Any]] = []
    for link in span_links:
        attributes, dropped = attributes_to_json(link.attributes)
        links.append({
            "trace_id": link.trace_id.hex(),
            "span_id": link.span_id.hex(),
            "trace_state": link.trace_state,
            "flags": link.flags,
            "attributes": dumps(attributes),
            "dropped_attributes_count": min(link.dropped_attributes_count + dropped,
                                            UINT32_MAX),
        })
    return links


class MessageReader:
    """How the span loop reads the parts of a span that need converting, from the generated
    protobuf classes. ingest/decode/proto_flatten.py reads them from raw bytes instead (faster);
    the loop, its validation and its rows are shared."""

    @staticmethod
    def resource(resource_spans: Any) -> tuple[str, tuple[Any, ...]]:
        return resource_row(resource_spans.resource, resource_spans.schema_url)

    @staticmethod
    def scope(scope_spans: Any) -> tuple[str, tuple[Any, ...]]:
        return scope_row(scope_spans.scope, scope_spans.schema_url)

    @staticmethod
    def attributes(span: Any) -> tuple[dict[str, Any] | str, int, dict[str, Any]]:
        return span_attributes_to_json(span.attributes)

    @staticmethod
    def events(span: Any) -> tuple[list[dict[str, Any]], list[str]]:
        return events_rows(span.events[:MAX_EVENTS])

    @staticmethod
    def links(span: Any) -> list[dict[str, Any]]:
        return links_rows(span.links[:MAX_LINKS])


def flatten_resource_spans(
    resource_spans: ResourceSpans,
    batch: FlatBatch,
    *,
    where: str = "",
    latest_start_ns: int,
    reader: Any = MessageReader,
) -> None:
    resource_id, resource_values = reader.resource(resource_spans)
    service_name = resource_values[1]
    resource_used = False
    for scope_index, scope_spans in enumerate(resource_spans.scope_spans):
        scope_id, scope_values = reader.scope(scope_spans)
        if scope_spans.spans:
            batch.scopes[scope_id] = scope_values
        for span_index, span in enumerate(scope_spans.spans):
            trace_id, span_id, parent_span_id = span.trace_id, span.span_id, span.parent_span_id
            start, end = span.start_time_unix_nano, span.end_time_unix_nano
            flags, kind, status = span.flags, span.kind, span.status
            problem = (id_problem(trace_id, span_id, parent_span_id)
                       or time_problem(start, end, latest_start_ns)
                       or field_problem(flags, kind, status.code))
            if problem:
                refuse(batch, span.name, problem,
                       locate(where, f"scope {scope_index}", f"span {span_index}"))
                continue
            resource_used = True
            attributes, dropped_attributes, typed = reader.attributes(span)
            events, exception_types = reader.events(span)
            # Past the limits (ingest/decode/any_value.py), counted as dropped as the OTel SDK does.
            dropped_events = span.dropped_events_count + max(len(span.events) - MAX_EVENTS, 0)
            dropped_links = span.dropped_links_count + max(len(span.links) - MAX_LINKS, 0)
            append_span(
                batch, trace_id, span_id, parent_span_id, span.trace_state, flags,
                span.name[:MAX_NAME_CHARS], kind, start, end, status.code, status.message,
                resource_id, scope_id, service_name, attributes,
                span.dropped_attributes_count + dropped_attributes, typed, events,
                exception_types, dropped_events, reader.links(span), dropped_links,
                locate(where, f"scope {scope_index}", f"span {span_index}"))
    if resource_used:
        batch.resources[resource_id] = resource_values


def latest_acceptable_start_ns(max_future_ns: int = DEFAULT_MAX_FUTURE_NS) -> int:
    return time.time_ns() + max_future_ns


def flatten_request(
    request: ExportTraceServiceRequest,
    *,
    where: str = "",
    max_future_ns: int = DEFAULT_MAX_FUTURE_NS,
    into: FlatBatch | None = None,
    reader: Any = MessageReader,
) -> FlatBatch:
    """Flatten a request into a new batch, or append it to `into` (saves a copy when a loader
    gathers many small requests into one transaction)."""
    batch = into if into is not None else FlatBatch()
    latest = latest_acceptable_start_ns(max_future_ns)
    for index, resource_spans in enumerate(request.resource_spans):
        flatten_resource_spans(resource_spans, batch, where=locate(where, f"resource {index}"),
                               latest_start_ns=latest, reader=reader)
    return batch
