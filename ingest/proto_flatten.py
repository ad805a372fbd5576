"""A protobuf request body → FlatBatch, fast: the receivers' hot path.

Rows are the same as `decode_request` + `flatten_request` make (tests/test_proto_flatten.py
compares them whole); what differs is how attributes are read. The body is parsed with
ingest/wire_messages.py, which leaves each attribute (a KeyValue) as its serialized bytes, and
each distinct attribute is converted once: its JSON text, its typed column and typed value are
kept in a bounded cache keyed by those bytes. A span's attributes JSON is then the join of its
attributes' cached fragments (what json.dumps would write for the same dict, byte for byte).
Resources and scopes are cached by their raw bytes the same way. Measured with
bench/bench_ingest_stages.py on bench_receivers' payloads: see the commit that added this.

Anything the fast path cannot take as it is (a body the wire classes cannot parse, an attribute,
event, link, resource or scope whose bytes do not decode, e.g. invalid UTF-8) sends the whole
body down the careful path, `decode_request` + `flatten_request`, which salvages what it can
and names what it refused; so every refusal reads the same whichever path met it first.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ingest.any_value import MAX_ATTRIBUTES, MAX_VALUE_CHARS, any_value_to_json
from ingest.flatten import (
    DEFAULT_MAX_FUTURE_NS,
    FlatBatch,
    dumps,
    events_rows,
    flatten_request,
    links_rows,
    resource_row,
    scope_row,
)
from ingest.proto_decode import decode_request
from ingest.typed_attributes import TYPED_ATTRIBUTES, pick_grpc_status
from ingest.wire_messages import WireRequest

# Attributes longer than this (prompts, payloads) are converted every time rather than cached:
# they rarely repeat and would crowd out the short ones that do.
_CACHED_ATTRIBUTE_BYTES = 512
_CACHE_LIMIT = 65_536  # entries; the cache is cleared when it reaches this
# serialized KeyValue → (key, '"key":value' JSON fragment, typed column or None, typed value)
_Entry = tuple[str, str, str | None, Any]
_attribute_cache: dict[bytes, _Entry] = {}
# (raw bytes, schema_url) → (id, row), for resources and scopes
_resource_cache: dict[tuple[bytes, str], tuple[str, tuple[Any, ...]]] = {}
_scope_cache: dict[tuple[bytes, str], tuple[str, tuple[Any, ...]]] = {}


def _attribute_entry(raw: bytes) -> _Entry:
    """Convert one serialized KeyValue as ingest/any_value.py does. Raises DecodeError."""
    kv = KeyValue.FromString(raw)
    value = kv.value
    which = value.WhichOneof("value")
    if which == "string_value":
        converted: Any = value.string_value[:MAX_VALUE_CHARS]
    elif which == "int_value":
        converted = value.int_value
    else:
        converted = any_value_to_json(value)
    key = kv.key
    spec = TYPED_ATTRIBUTES.get(key)
    entry = (key, f"{dumps(key)}:{dumps(converted)}",
             spec[0] if spec else None, spec[1](converted) if spec else None)
    if len(raw) <= _CACHED_ATTRIBUTE_BYTES:
        if len(_attribute_cache) >= _CACHE_LIMIT:
            _attribute_cache.clear()
        _attribute_cache[raw] = entry
    return entry


def _attributes(raw_attributes: Any) -> tuple[str, int, dict[str, Any]]:
    """(attributes JSON, dropped by the count limit, typed columns) of one span."""
    fragments: dict[str, str] = {}
    typed: dict[str, Any] = {}
    dropped = 0
    cache_get = _attribute_cache.get
    for raw in raw_attributes:
        entry = cache_get(raw) or _attribute_entry(raw)
        key = entry[0]
        if len(fragments) >= MAX_ATTRIBUTES and key not in fragments:
            dropped += 1
            continue
        fragments[key] = entry[1]  # a repeated key: its first place, its last value (as a dict)
        if entry[2] is not None:
            typed[entry[2]] = entry[3]
    if typed:
        pick_grpc_status(typed)
    return "{" + ",".join(fragments.values()) + "}", dropped, typed


def _cached_row(cache: dict[tuple[bytes, str], tuple[str, tuple[Any, ...]]], raw: bytes,
                schema_url: str, build: Any) -> tuple[str, tuple[Any, ...]]:
    key = (raw, schema_url)
    row = cache.get(key)
    if row is None:
        if len(cache) >= 4096:
            cache.clear()
        row = cache[key] = build(raw, schema_url)
    return row


def _resource(raw: bytes, schema_url: str) -> tuple[str, tuple[Any, ...]]:
    # The id is the careful path's (a digest of the deterministic serialization), not of the
    # raw bytes, so that one resource gets one id whichever path stored it.
    return _cached_row(_resource_cache, raw, schema_url,
                       lambda data, url: resource_row(Resource.FromString(data), url))


def _scope(raw: bytes, schema_url: str) -> tuple[str, tuple[Any, ...]]:
    return _cached_row(_scope_cache, raw, schema_url,
                       lambda data, url: scope_row(InstrumentationScope.FromString(data), url))


_event_from, _link_from = Span.Event.FromString, Span.Link.FromString


class WireReader:
    """The parts of a span that need converting, read from the wire classes' raw bytes (the
    span loop and its validation are flatten.py's, shared with the careful path). Raises
    DecodeError when some bytes do not decode."""

    @staticmethod
    def resource(resource_spans: Any) -> tuple[str, tuple[Any, ...]]:
        return _resource(resource_spans.resource, resource_spans.schema_url)

    @staticmethod
    def scope(scope_spans: Any) -> tuple[str, tuple[Any, ...]]:
        return _scope(scope_spans.scope, scope_spans.schema_url)

    @staticmethod
    def attributes(span: Any) -> tuple[str, int, dict[str, Any]]:
        return _attributes(span.attributes)

    @staticmethod
    def events(span: Any) -> tuple[list[dict[str, Any]], list[str]]:
        raw_events = span.events
        return events_rows(map(_event_from, raw_events)) if raw_events else ([], [])

    @staticmethod
    def links(span: Any) -> list[dict[str, Any]]:
        raw_links = span.links
        return links_rows(map(_link_from, raw_links)) if raw_links else []


def flatten_protobuf(body: bytes, where: str = "",
                     max_future_ns: int = DEFAULT_MAX_FUTURE_NS) -> FlatBatch:
    """Rows of one serialized ExportTraceServiceRequest. Raises UndecodableMessage when
    nothing in it is a request (from decode_request, on the careful path)."""
    try:
        return flatten_request(WireRequest.FromString(body), where=where,
                               max_future_ns=max_future_ns, reader=WireReader)
    except DecodeError:
        pass
    request, rejections = decode_request(body, where)
    batch = flatten_request(request, where=where, max_future_ns=max_future_ns)
    batch.rejections[:0] = rejections
    return batch


def flatten_parsed(request: ExportTraceServiceRequest, *, where: str = "",
                   max_future_ns: int = DEFAULT_MAX_FUTURE_NS,
                   into: FlatBatch | None = None) -> FlatBatch:
    """Like flatten_request, for a request already parsed by the generated classes (files):
    serialized again (~1 µs a span) and read through the wire classes and their caches. Into a
    batch of its own first, so that a DecodeError half way leaves `into` untouched."""
    try:
        batch = flatten_request(WireRequest.FromString(request.SerializeToString()), where=where,
                                max_future_ns=max_future_ns, reader=WireReader)
    except DecodeError:
        batch = flatten_request(request, where=where, max_future_ns=max_future_ns)
    if into is None:
        return batch
    into.extend(batch)
    return into
