"""Parts the protobuf runtime refuses whole, rebuilt from the wire: a span refused for nesting
depth alone (values cut at our depth), and a resource with invalid UTF-8 (the bad text replaced).

The runtime stops parsing at 100 nested messages (an array level is 2, a kvlist level 3), so a
span with an attribute nested that deep could not be decoded at all, and the careful path
(ingest/decode/proto_decode.py: files, and bodies the fast path cannot take) refused it, although
docs/storage.md says values nested deeper than 16 levels are replaced by a marker. Here
the span is read with the wire classes (attributes, events and links as raw bytes), every part the
runtime takes is kept as it is, and each attribute it refuses is read from the wire
(ingest/decode/any_value_wire.py, which stops at the depth limit) and written back as the value that
will be stored: the same rows as the fast path gives for the same bytes.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ingest.decode.any_value_wire import key_value_from_wire
from ingest.decode.protowire import LENGTH_DELIMITED, VARINT, WireError, iter_fields, read_varint
from ingest.decode.wire_messages import WireEvent, WireLink, WireSpan


def _to_any_value(value: Any, target: AnyValue) -> None:
    """The stored form of a value (ingest/decode/any_value.py) as the AnyValue that stores as it."""
    if value is None:
        return
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, list):
        target.array_value.SetInParent()
        for item in value:
            _to_any_value(item, target.array_value.values.add())
    elif isinstance(value, dict) and set(value) == {"bytesValue"}:
        target.bytes_value = base64.b64decode(value["bytesValue"])
    elif isinstance(value, dict):
        target.kvlist_value.SetInParent()
        for key, item in value.items():
            entry = target.kvlist_value.values.add()
            entry.key = key
            _to_any_value(item, entry.value)


def _attributes(raw_attributes: Any, into: Any) -> None:
    for raw in raw_attributes:
        attribute: KeyValue = into.add()
        try:
            attribute.MergeFromString(raw)
        except DecodeError:
            attribute.Clear()
            key, value = key_value_from_wire(raw)  # DecodeError: not depth, refuse the span
            attribute.key = key
            _to_any_value(value, attribute.value)


def _rebuilt(wire: Any, target: Any, rebuild: Any) -> None:
    """Parse `wire` into `target` without its attributes, then add them one by one."""
    raw_attributes = list(wire.attributes)
    del wire.attributes[:]
    target.MergeFromString(wire.SerializeToString())
    rebuild(raw_attributes, target.attributes)


def repair_span(data: bytes) -> Span | None:
    """The span in `data` with values nested past the runtime's limit cut at ours; None when
    something else is wrong with it (invalid UTF-8, a corrupt field): then it stays refused."""
    try:
        wire = WireSpan.FromString(data)
        raw_events, raw_links = list(wire.events), list(wire.links)
        del wire.events[:]
        del wire.links[:]
        span = Span()
        _rebuilt(wire, span, _attributes)
        for raw in raw_events:
            event = span.events.add()
            try:
                event.MergeFromString(raw)
            except DecodeError:
                event.Clear()
                _rebuilt(WireEvent.FromString(raw), event, _attributes)
        for raw in raw_links:
            link = span.links.add()
            try:
                link.MergeFromString(raw)
            except DecodeError:
                link.Clear()
                _rebuilt(WireLink.FromString(raw), link, _attributes)
    except DecodeError:
        return None
    return span


def repair_resource(data: bytes) -> tuple[Resource, int] | None:
    """A resource the runtime refuses, attribute by attribute: each attribute that does not
    decode is read again with every invalid UTF-8 sequence replaced by U+FFFD, so that its spans
    keep their service.name and the rest of the resource (the whole resource was dropped
    before). Returns the resource and how many attributes were replaced; None when its bytes
    are not a Resource at all."""
    resource = Resource()
    replaced = 0
    try:
        for field, wire_type, start, end in iter_fields(data):
            chunk = data[start:end]
            if field == 1 and wire_type == LENGTH_DELIMITED:
                attribute = resource.attributes.add()
                try:
                    attribute.MergeFromString(chunk)
                except DecodeError:
                    attribute.Clear()
                    key, value = key_value_from_wire(chunk, lenient=True)
                    attribute.key = key
                    _to_any_value(value, attribute.value)
                    replaced += 1
            elif field == 2 and wire_type == VARINT:
                resource.dropped_attributes_count = min(read_varint(chunk, 0)[0], 2**32 - 1)
    except (WireError, DecodeError):
        return None
    return resource, replaced
