"""A protobuf request body → FlatBatch, fast: the receivers' hot path.

Rows are the same as `decode_request` + `flatten_request` make (tests/ingest/test_proto_flatten.py
compares them whole); what differs is how attributes are read. The body is parsed with
ingest/decode/wire_messages.py, which leaves each attribute (a KeyValue) as its serialized bytes,
and
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

from ingest.decode.any_value import (
    MAX_ATTRIBUTES,
    MAX_EVENTS,
    MAX_KEY_CHARS,
    MAX_LINKS,
    MAX_NAME_CHARS,
    MAX_VALUE_CHARS,
    any_value_to_json,
)
from ingest.decode.any_value_wire import key_from_wire, key_value_from_wire
from ingest.decode.bounded_cache import BoundedCache
from ingest.decode.flatten import (
    DEFAULT_MAX_FUTURE_NS,
    INT64_MAX,
    UINT32_MAX,
    dumps,
    flatten_request,
    resource_row,
    scope_row,
)
from ingest.decode.proto_decode import decode_request
from ingest.decode.wire_messages import WireEvent, WireLink, WireRequest
from store import EXCEPTION_EVENT, TYPED_ATTRIBUTES, FlatBatch, merge_named_columns

# Attributes longer than this (prompts, payloads) are converted every time rather than cached:
# they rarely repeat and would crowd out the short ones that do.
_CACHED_ATTRIBUTE_BYTES = 512
# Attributes larger than this are read from the wire format (ingest/decode/any_value_wire.py), which
# parses only what the limits keep, instead of being parsed whole by the runtime first.
_RUNTIME_ATTRIBUTE_BYTES = 64 * 1024
_CACHE_LIMIT = 65_536  # entries; the cache is cleared when it reaches this
# serialized KeyValue → (key, '"key":value' JSON fragment, typed column or None, typed value,
# the value itself)
_Entry = tuple[str, str, str | None, Any, Any]
# The caches are shared by the receiver threads (ingest/decode/bounded_cache.py says why reads
# take no lock).
_attribute_cache: BoundedCache[bytes, _Entry] = BoundedCache(_CACHE_LIMIT)
# (raw bytes, schema_url) → (id, row), for resources and scopes
_RowCache = BoundedCache[tuple[bytes, str], tuple[str, tuple[Any, ...]]]
_resource_cache: _RowCache = BoundedCache(4096)
_scope_cache: _RowCache = BoundedCache(4096)


def _attribute_entry(raw: bytes) -> _Entry:
    """Convert one serialized KeyValue as ingest/decode/any_value.py does. Raises DecodeError."""
    converted: Any
    if len(raw) > _RUNTIME_ATTRIBUTE_BYTES:
        key, converted = key_value_from_wire(raw)
    else:
        try:
            kv = KeyValue.FromString(raw)
        except DecodeError:
            # Nested past the runtime's recursion limit, or not decodable at all (then this
            # raises DecodeError too, and the body takes the careful path).
            key, converted = key_value_from_wire(raw)
        else:
            value = kv.value
            which = value.WhichOneof("value")
            if which == "string_value":
                converted = value.string_value[:MAX_VALUE_CHARS]
            elif which == "int_value":
                converted = value.int_value
            else:
                converted = any_value_to_json(value)
            key = kv.key
    spec = TYPED_ATTRIBUTES.get(key)
    entry = (key, f"{dumps(key)}:{dumps(converted)}",
             spec[0] if spec else None, spec[1](converted) if spec else None, converted)
    if len(raw) <= _CACHED_ATTRIBUTE_BYTES:
        _attribute_cache.put(raw, entry)
    return entry


def _attribute_entries(raw_attributes: Any) -> tuple[dict[str, _Entry], int]:
    """The kept attributes by key (a repeated key: its first place, its last value, as a dict
    keeps them) and how many the limits dropped."""
    entries: dict[str, _Entry] = {}
    dropped = 0
    cache_get = _attribute_cache.get
    for raw in raw_attributes:
        if len(entries) >= MAX_ATTRIBUTES and raw not in _attribute_cache \
                and key_from_wire(raw) not in entries:
            dropped += 1  # past the count limit: never converted (3.7M of them took 61 s)
            continue
        entry = cache_get(raw) or _attribute_entry(raw)
        key = entry[0]
        if (len(entries) >= MAX_ATTRIBUTES and key not in entries) or len(key) > MAX_KEY_CHARS:
            dropped += 1
            continue
        entries[key] = entry
    return entries, dropped


def _json(entries: dict[str, _Entry]) -> str:
    return "{" + ",".join(entry[1] for entry in entries.values()) + "}"


def _attributes(raw_attributes: Any) -> tuple[str, int, dict[str, Any]]:
    """(attributes JSON, dropped by the limits, typed columns) of one span."""
    entries, dropped = _attribute_entries(raw_attributes)
    typed = {entry[2]: entry[3] for entry in entries.values() if entry[2] is not None}
    if typed:
        merge_named_columns(typed)
    return _json(entries), dropped, typed


def _cached_row(cache: _RowCache, raw: bytes, schema_url: str, build: Any
                ) -> tuple[str, tuple[Any, ...]]:
    key = (raw, schema_url)
    row = cache.get(key)
    if row is None:
        row = cache.put(key, build(raw, schema_url))
    return row


def _resource(raw: bytes, schema_url: str) -> tuple[str, tuple[Any, ...]]:
    # The id is the careful path's (a digest of the deterministic serialization), not of the
    # raw bytes, so that one resource gets one id whichever path stored it.
    return _cached_row(_resource_cache, raw, schema_url,
                       lambda data, url: resource_row(Resource.FromString(data), url))


def _scope(raw: bytes, schema_url: str) -> tuple[str, tuple[Any, ...]]:
    return _cached_row(_scope_cache, raw, schema_url,
                       lambda data, url: scope_row(InstrumentationScope.FromString(data), url))


def _events(raw_events: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """As flatten.events_rows, from the wire: attributes through the same cache and limits."""
    events: list[dict[str, Any]] = []
    exception_types: list[str] = []
    for raw in raw_events[:MAX_EVENTS]:
        event = WireEvent.FromString(raw)
        entries, dropped = _attribute_entries(event.attributes)
        name = event.name[:MAX_NAME_CHARS]
        events.append({
            "time_ns": min(event.time_unix_nano, INT64_MAX),
            "name": name,
            "attributes": _json(entries),
            "dropped_attributes_count": min(event.dropped_attributes_count + dropped,
                                            UINT32_MAX),
        })
        if name == EXCEPTION_EVENT:
            exception_type = entries.get("exception.type")
            if exception_type is not None and isinstance(exception_type[4], str) \
                    and exception_type[4]:
                exception_types.append(exception_type[4])
    return events, exception_types


def _links(raw_links: Any) -> list[dict[str, Any]]:
    links: list[dict[str, Any]] = []
    for raw in raw_links[:MAX_LINKS]:
        link = WireLink.FromString(raw)
        entries, dropped = _attribute_entries(link.attributes)
        links.append({
            "trace_id": link.trace_id.hex(),
            "span_id": link.span_id.hex(),
            "trace_state": link.trace_state,
            "flags": link.flags,
            "attributes": _json(entries),
            "dropped_attributes_count": min(link.dropped_attributes_count + dropped,
                                            UINT32_MAX),
        })
    return links


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
        return _events(raw_events) if raw_events else ([], [])

    @staticmethod
    def links(span: Any) -> list[dict[str, Any]]:
        raw_links = span.links
        return _links(raw_links) if raw_links else []


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
