"""ExportTraceServiceRequest as seen by the fast flattener: the same wire format, with the
attributes, events, links, resource and scope of each message left as raw bytes.

The generated classes turn every attribute into two Python objects (KeyValue, AnyValue) that are
read field by field: ~1 µs per attribute on this machine, a third of all flattening. Parsed
with these classes instead, an attribute is one bytes object, and an attribute seen before (the
same key and value, which agents repeat on almost every span: operation, model, tool, attempt)
is converted once and then found by a dict lookup (ingest/decode/proto_flatten.py).

Field numbers and wire types are those of opentelemetry/proto/trace/v1/trace.proto: `bytes` in
place of a message keeps the wire format, so any body the real classes parse, these parse too
(string fields still check UTF-8 as the real ones do). The classes live in a private descriptor
pool so that they never clash with the real ones.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "budgetscope.wire"
_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_BYTES, _STRING, _MESSAGE = _F.TYPE_BYTES, _F.TYPE_STRING, _F.TYPE_MESSAGE
_INT32, _UINT32 = _F.TYPE_INT32, _F.TYPE_UINT32
_FIXED32, _FIXED64 = _F.TYPE_FIXED32, _F.TYPE_FIXED64

# message name → (field name, number, type, label, message type name)
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    "Request": [("resource_spans", 1, _MESSAGE, _REPEATED, "ResourceSpans")],
    "ResourceSpans": [
        ("resource", 1, _BYTES, _OPTIONAL, ""),
        ("scope_spans", 2, _MESSAGE, _REPEATED, "ScopeSpans"),
        ("schema_url", 3, _STRING, _OPTIONAL, ""),
    ],
    "ScopeSpans": [
        ("scope", 1, _BYTES, _OPTIONAL, ""),
        ("spans", 2, _MESSAGE, _REPEATED, "Span"),
        ("schema_url", 3, _STRING, _OPTIONAL, ""),
    ],
    "Span": [
        ("trace_id", 1, _BYTES, _OPTIONAL, ""),
        ("span_id", 2, _BYTES, _OPTIONAL, ""),
        ("trace_state", 3, _STRING, _OPTIONAL, ""),
        ("parent_span_id", 4, _BYTES, _OPTIONAL, ""),
        ("flags", 16, _FIXED32, _OPTIONAL, ""),
        ("name", 5, _STRING, _OPTIONAL, ""),
        ("kind", 6, _INT32, _OPTIONAL, ""),  # an enum on the wire is a varint, as int32 is
        ("start_time_unix_nano", 7, _FIXED64, _OPTIONAL, ""),
        ("end_time_unix_nano", 8, _FIXED64, _OPTIONAL, ""),
        ("attributes", 9, _BYTES, _REPEATED, ""),  # each a serialized KeyValue
        ("dropped_attributes_count", 10, _UINT32, _OPTIONAL, ""),
        ("events", 11, _BYTES, _REPEATED, ""),  # each a serialized Span.Event
        ("dropped_events_count", 12, _UINT32, _OPTIONAL, ""),
        ("links", 13, _BYTES, _REPEATED, ""),  # each a serialized Span.Link
        ("dropped_links_count", 14, _UINT32, _OPTIONAL, ""),
        ("status", 15, _MESSAGE, _OPTIONAL, "Status"),
    ],
    # Span.Event and Span.Link, read by the fast path only when a span has some.
    "Event": [
        ("time_unix_nano", 1, _FIXED64, _OPTIONAL, ""),
        ("name", 2, _STRING, _OPTIONAL, ""),
        ("attributes", 3, _BYTES, _REPEATED, ""),
        ("dropped_attributes_count", 4, _UINT32, _OPTIONAL, ""),
    ],
    "Link": [
        ("trace_id", 1, _BYTES, _OPTIONAL, ""),
        ("span_id", 2, _BYTES, _OPTIONAL, ""),
        ("trace_state", 3, _STRING, _OPTIONAL, ""),
        ("attributes", 4, _BYTES, _REPEATED, ""),
        ("dropped_attributes_count", 5, _UINT32, _OPTIONAL, ""),
        ("flags", 6, _FIXED32, _OPTIONAL, ""),
    ],
    "Status": [
        ("message", 2, _STRING, _OPTIONAL, ""),
        ("code", 3, _INT32, _OPTIONAL, ""),
    ],
}


def _build() -> dict[str, type]:
    file = descriptor_pb2.FileDescriptorProto(
        name="budgetscope/wire_trace.proto", package=_PACKAGE, syntax="proto3")
    for message_name, fields in _MESSAGES.items():
        message = file.message_type.add(name=message_name)
        for name, number, field_type, label, type_name in fields:
            field = message.field.add(name=name, number=number, type=field_type, label=label)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
            for name in _MESSAGES}


_CLASSES = _build()
WireRequest = _CLASSES["Request"]
WireSpan = _CLASSES["Span"]
WireEvent = _CLASSES["Event"]
WireLink = _CLASSES["Link"]
