"""OpenTelemetry-style limits beyond attribute values: elements of
arrays and kvlists, events and links per span, span-name and attribute-key length, and values
nested past the protobuf runtime's own depth limit. The same rows on every path: the fast
protobuf path, the careful one, and OTLP JSON. The cases over HTTP and through files are rows of
tests/ingest/test_hostile_input.py; bench/bench_hostile_memory.py measures the memory they cost.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ingest.decode.any_value import (
    DROPPED_ELEMENTS_KEY,
    MAX_DEPTH,
    MAX_EVENTS,
    MAX_KEY_CHARS,
    MAX_LINKS,
    MAX_NAME_CHARS,
    MAX_VALUE_ELEMENTS,
    TRUNCATED_DEPTH_MARKER,
    any_value_to_json,
    dropped_elements_marker,
)
from ingest.decode.any_value_wire import key_value_from_wire
from ingest.decode.otlp_json import flatten_json_request
from ingest.decode.proto_flatten import flatten_protobuf
from tests.support.flatten_paths import assert_same, careful
from tests.support.otlp_files import otlp_json

NOW = 1_795_428_000 * 10**9

scalars = st.one_of(
    st.text(max_size=8).map(lambda text: AnyValue(string_value=text)),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda n: AnyValue(int_value=n)),
    st.floats().map(lambda x: AnyValue(double_value=x)),
    st.booleans().map(lambda b: AnyValue(bool_value=b)),
    st.binary(max_size=8).map(lambda raw: AnyValue(bytes_value=raw)),
    st.just(AnyValue()),
)


def _array(values: list[AnyValue]) -> AnyValue:
    return AnyValue(array_value={"values": values})


def _kvlist(entries: list[tuple[str, AnyValue]]) -> AnyValue:
    return AnyValue(kvlist_value={"values": [KeyValue(key=k, value=v) for k, v in entries]})


values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=6).map(_array),
    st.lists(st.tuples(st.text(max_size=4), inner), max_size=6).map(_kvlist)), max_leaves=60)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(value=values, key=st.text(max_size=6))
def test_the_wire_reader_stores_what_the_runtime_path_stores(value: AnyValue, key: str) -> None:
    raw = KeyValue(key=key, value=value).SerializeToString()
    assert key_value_from_wire(raw)[0] == key
    assert _same(key_value_from_wire(raw)[1], any_value_to_json(value))


def _deep(depth: int) -> AnyValue:
    value = AnyValue(string_value="bottom")
    for _ in range(depth):
        value = _array([value])
    return value


def test_nesting_is_cut_at_the_same_level_both_ways() -> None:
    for depth in (MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 40):
        raw = KeyValue(key="k", value=_deep(depth)).SerializeToString()
        assert key_value_from_wire(raw)[1] == any_value_to_json(_deep(depth))


def test_a_value_nested_past_the_runtime_limit_keeps_the_marker() -> None:
    # 500 array levels are 1,000 messages: the runtime refuses to parse them at all (built in
    # place: copying such a message parses it).
    kv = KeyValue(key="k")
    level = kv.value
    for _ in range(500):
        level = level.array_value.values.add()
    level.string_value = "bottom"
    value = key_value_from_wire(kv.SerializeToString())[1]
    for _ in range(MAX_DEPTH):
        value = value[0]
    assert value == TRUNCATED_DEPTH_MARKER


def test_elements_are_counted_over_every_level() -> None:
    # 100 arrays of 100: 10,100 elements; the first 4,096 in depth-first order are kept.
    value = _array([_array([AnyValue(int_value=i) for i in range(100)]) for _ in range(100)])
    stored = any_value_to_json(value)
    assert stored == key_value_from_wire(KeyValue(key="k", value=value).SerializeToString())[1]
    kept_outer = MAX_VALUE_ELEMENTS // 101 + 1  # each inner array costs itself + 100
    assert len(stored) == kept_outer + 1
    assert stored[-1] == dropped_elements_marker(100 - kept_outer)
    flat = [x for inner in stored[:-1] for x in inner if isinstance(x, int)]
    assert len(flat) + kept_outer == MAX_VALUE_ELEMENTS
    big = _kvlist([(f"k{i}", AnyValue(int_value=i)) for i in range(MAX_VALUE_ELEMENTS + 9)])
    assert any_value_to_json(big)[DROPPED_ELEMENTS_KEY] == 9


def _limited_request() -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.add(key="service.name").value.string_value = "svc"
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id = os.urandom(16), os.urandom(8)
    span.name = "n" * (MAX_NAME_CHARS + 500)
    span.start_time_unix_nano, span.end_time_unix_nano = NOW, NOW + 10**9
    span.dropped_events_count, span.dropped_links_count = 3, 4
    span.attributes.add(key="k" * (MAX_KEY_CHARS + 1)).value.int_value = 1
    span.attributes.add(key="kept").value.CopyFrom(
        _array([AnyValue(string_value="x")] * (MAX_VALUE_ELEMENTS + 10)))
    span.attributes.add(key="deep").value.CopyFrom(_deep(MAX_DEPTH + 2))
    for index in range(MAX_EVENTS + 20):
        event = span.events.add(name="exception" if index == 0 else "e" * (MAX_NAME_CHARS + 1),
                                time_unix_nano=NOW)
        event.attributes.add(key="exception.type").value.string_value = "TimeoutError"
        event.attributes.add(key="k" * (MAX_KEY_CHARS + 1)).value.int_value = 1
    for index in range(MAX_LINKS + 30):
        link = span.links.add(trace_id=os.urandom(16), span_id=os.urandom(8))
        if index == 0:
            link.attributes.add(key="big").value.CopyFrom(
                _array([AnyValue(int_value=1)] * (MAX_VALUE_ELEMENTS + 1)))
    return request


def test_every_limit_gives_the_same_rows_on_every_path() -> None:
    request = _limited_request()
    body = request.SerializeToString()
    fast = flatten_protobuf(body)
    assert_same(fast, careful(body))
    from_json = flatten_json_request(json.loads(json.dumps(otlp_json(request))))
    assert from_json.spans == fast.spans and not fast.rejections
    row = {column: values[0] for column, values in fast.spans.items()}
    assert len(row["name"]) == MAX_NAME_CHARS
    attributes = json.loads(row["attributes"])
    assert set(attributes) == {"kept", "deep"} and row["dropped_attributes_count"] == 1
    assert attributes["kept"][-1] == dropped_elements_marker(10)
    assert (len(row["events"]), row["dropped_events_count"]) == (MAX_EVENTS, 3 + 20)
    assert (len(row["links"]), row["dropped_links_count"]) == (MAX_LINKS, 4 + 30)
    assert row["exception_types"] == ["TimeoutError"]
    assert len(row["events"][1]["name"]) == MAX_NAME_CHARS
    assert row["events"][0]["dropped_attributes_count"] == 1
    assert json.loads(row["links"][0]["attributes"])["big"][-1] == dropped_elements_marker(1)
