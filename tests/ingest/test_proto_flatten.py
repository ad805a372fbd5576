"""The receivers' fast protobuf flattener (ingest/decode/proto_flatten.py) makes exactly the rows,
ids and
refusals of the careful path (decode_request + flatten_request) it replaces."""

from __future__ import annotations

import math
import os

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ingest.decode.any_value import MAX_ATTRIBUTES, MAX_DEPTH, MAX_VALUE_CHARS
from ingest.decode.proto_flatten import flatten_parsed, flatten_protobuf
from tests.support.flatten_paths import assert_same, careful

NOW = 1_795_428_000 * 10**9


def put(attributes, key: str, value: object) -> AnyValue:  # type: ignore[no-untyped-def]
    kv = attributes.add()
    kv.key = key
    target = kv.value
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif isinstance(value, str):
        target.string_value = value
    return target


def nested(depth: int) -> AnyValue:
    value = AnyValue(string_value="bottom")
    for _ in range(depth):
        value = AnyValue(array_value={"values": [value]})
    return value


def rich_request() -> ExportTraceServiceRequest:
    """Every kind of value, the typed attributes under their odd spellings, repeated keys,
    events and links, refused spans of every reason, two resources and scopes."""
    request = ExportTraceServiceRequest()
    for resource_index in range(2):
        resource_spans = request.resource_spans.add()
        resource_spans.schema_url = f"https://schema/{resource_index}"
        put(resource_spans.resource.attributes, "service.name", f"svc-{resource_index}")
        put(resource_spans.resource.attributes, "host.cores", 2)
        for scope_index in range(2):
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = f"scope-{scope_index}"
            scope_spans.scope.version = "1.0"
            put(scope_spans.scope.attributes, "lib", "x")
            for index in range(12):
                span = scope_spans.spans.add()
                span.trace_id = bytes([resource_index + 1, scope_index + 1]) + bytes(13) + b"\x01"
                span.span_id = bytes([index + 1]) + bytes(6) + bytes([scope_index + 1])
                span.parent_span_id = b"\x09" * 8 if index else b""
                span.name = f"step {index}"
                span.kind = index % 6
                span.flags = 0x301
                span.trace_state = "k=v"
                span.start_time_unix_nano = NOW + index
                span.end_time_unix_nano = NOW + 10**9
                span.status.code = index % 3
                span.status.message = "boom" if index % 3 == 2 else ""
                span.dropped_attributes_count = index
                span.dropped_events_count = 1
                span.dropped_links_count = 2
                attributes = span.attributes
                operations = ["chat", "execute_tool", " Chat "]
                put(attributes, "gen_ai.operation.name", operations[index % 3])
                put(attributes, "gen_ai.tool.name", "search")
                put(attributes, "budget.total_ms", ["120000", 120_000, 1.5e5][index % 3])
                put(attributes, "budget.hedge", ["yes", True, 0][index % 3])
                put(attributes, "budget.attempt", 2**70 // 2**70 if index else -3)
                put(attributes, "rpc.status_code", "deadline_exceeded")
                put(attributes, "rpc.grpc.status_code", [14, 2**40, "x"][index % 3])
                put(attributes, "http.response.status_code", "503")
                put(attributes, "ratio", [math.nan, math.inf, -math.inf, 0.25][index % 4])
                put(attributes, "blob", b"\x00\xffraw")
                put(attributes, "empty", None)
                put(attributes, "long", "é" * (MAX_VALUE_CHARS + 5))
                put(attributes, "gen_ai.tool.name", "search-again")  # repeated: last value wins
                kvlist = put(attributes, "nested", None)
                inner = kvlist.kvlist_value.values.add()
                inner.key = "list"
                inner.value.array_value.values.add().int_value = index
                inner.value.array_value.values.add().string_value = "s"
                deep = attributes.add()
                deep.key = "deep"
                deep.value.CopyFrom(nested(MAX_DEPTH + 3))
                if index % 4 == 1:
                    event = span.events.add()
                    event.name = "exception"
                    event.time_unix_nano = NOW + 5
                    put(event.attributes, "exception.type", "TimeoutError")
                    span.events.add().name = "note"
                if index % 4 == 2:
                    link = span.links.add()
                    link.trace_id, link.span_id = b"\x05" * 16, b"\x06" * 8
                    put(link.attributes, "why", "reconcile")
            bad = scope_spans.spans
            bad.add(trace_id=b"\x01" * 15, span_id=b"\x02" * 8, name="short trace id",
                    start_time_unix_nano=NOW, end_time_unix_nano=NOW)
            bad.add(trace_id=bytes(16), span_id=b"\x02" * 8, name="zero trace id",
                    start_time_unix_nano=NOW, end_time_unix_nano=NOW)
            bad.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="backwards",
                    start_time_unix_nano=NOW, end_time_unix_nano=NOW - 1)
            bad.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="odd kind", kind=99,
                    start_time_unix_nano=NOW, end_time_unix_nano=NOW)
    # a scope with no spans, and a resource with no scopes
    request.resource_spans[0].scope_spans.add().scope.name = "idle"
    request.resource_spans.add()
    return request


def test_rich_request_same_rows_ids_and_refusals() -> None:
    body = rich_request().SerializeToString()
    fast = flatten_protobuf(body, "here")
    assert_same(fast, careful(body, "here"))
    # 16 spans refused, and budget.attempt -3 on the first span of each scope
    # reported as out of range: the span kept without it.
    refused = [r for r in fast.rejections if r.reason != "budget_out_of_range"]
    assert fast.span_count == 48 and len(refused) == 16
    assert [r.spans for r in fast.rejections if r not in refused] == [0, 0, 0, 0]
    # the second time every attribute comes from the cache: still the same rows
    assert_same(flatten_protobuf(body, "here"), careful(body, "here"))
    # files' already-parsed requests, appended to a batch holding rows already
    into = careful(body, "before")
    flatten_parsed(rich_request(), where="here", into=into)
    expected = careful(body, "before")
    expected.extend(careful(body, "here"))
    assert_same(into, expected)


def test_attribute_count_limit_same_as_careful_path() -> None:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=os.urandom(15) + b"\x01", span_id=b"\x01" * 8,
        start_time_unix_nano=NOW, end_time_unix_nano=NOW)
    for index in range(MAX_ATTRIBUTES + 10):
        put(span.attributes, f"k{index % (MAX_ATTRIBUTES + 5)}", index)
    body = request.SerializeToString()
    fast = flatten_protobuf(body)
    assert_same(fast, careful(body))
    assert fast.spans["dropped_attributes_count"] == [5]


def test_resource_sent_in_another_byte_order_gets_the_same_id() -> None:
    """A resource's id digests its deterministic serialization, not the bytes received: an
    explicitly encoded default (dropped_attributes_count = 0) must not make a second id."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    put(resource_spans.resource.attributes, "service.name", "svc")
    resource_spans.scope_spans.add().spans.add(
        trace_id=b"\x01" * 16, span_id=b"\x01" * 8, start_time_unix_nano=NOW,
        end_time_unix_nano=NOW)
    plain = request.SerializeToString()
    resource = resource_spans.resource.SerializeToString()
    padded_resource = resource + b"\x10\x00"  # field 2 (dropped_attributes_count) = 0
    rebuilt = (b"\x0a" + bytes([len(plain) - 2 + 2])  # one ResourceSpans, 2 bytes longer
               + b"\x0a" + bytes([len(padded_resource)]) + padded_resource
               + plain[2 + 2 + len(resource):])
    assert ExportTraceServiceRequest.FromString(rebuilt) == request
    assert flatten_protobuf(rebuilt).resources == flatten_protobuf(plain).resources
    assert_same(flatten_protobuf(rebuilt), careful(rebuilt))


def test_invalid_utf8_in_an_attribute_refuses_that_span_as_the_careful_path_does() -> None:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for index in range(3):
        span = spans.add(trace_id=b"\x01" * 16, span_id=bytes([index + 1]) * 8,
                         start_time_unix_nano=NOW, end_time_unix_nano=NOW, name=f"s{index}")
        put(span.attributes, "k", "ok")
    body = request.SerializeToString()
    good_value = KeyValue(key="k", value=AnyValue(string_value="ok")).SerializeToString()
    bad_value = good_value.replace(b"ok", b"\xff\xfe")
    assert body.count(good_value) == 3
    corrupt = body.replace(good_value, bad_value, 2).replace(bad_value, good_value, 1)
    fast = flatten_protobuf(corrupt)
    assert_same(fast, careful(corrupt))
    assert fast.span_count == 2
    assert [r.reason for r in fast.rejections] == ["undecodable_span"]


def test_events_and_links_that_do_not_decode_fall_back_whole() -> None:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=b"\x01" * 16, span_id=b"\x01" * 8, start_time_unix_nano=NOW,
        end_time_unix_nano=NOW)
    span.events.add(name="exception")
    body = request.SerializeToString()
    corrupt = body.replace(b"exception", b"\xffxception")
    assert Span.FromString(request.resource_spans[0].scope_spans[0].spans[0]
                           .SerializeToString()).events[0].name == "exception"
    assert_same(flatten_protobuf(corrupt), careful(corrupt))
