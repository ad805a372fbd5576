"""OTLP AnyValue → plain JSON-able Python values, within OpenTelemetry-style limits.

Attributes are stored as one JSON object per span: key → value. Strings, ints, doubles, bools,
arrays and kvlists map onto JSON directly; bytes (which JSON has no type for) become
{"bytesValue": base64} as OTLP JSON writes them; non-finite doubles become the strings "NaN",
"Infinity" and "-Infinity", as the proto3 JSON mapping writes them (DuckDB's JSON rejects bare NaN).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ingest.typed_attributes import TYPED_ATTRIBUTES, pick_grpc_status

# Limits in the spirit of the OpenTelemetry SDK's span limits: keep the span, drop the excess,
# and count what was dropped, instead of refusing a whole batch for one oversized attribute.
MAX_ATTRIBUTES = 1024
MAX_VALUE_CHARS = 64 * 1024
MAX_DEPTH = 16
TRUNCATED_DEPTH_MARKER = "<budgetscope: nested deeper than 16 levels, truncated>"


def _double(value: float) -> float | str:
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def any_value_to_json(value: AnyValue, depth: int = 0) -> Any:
    which = value.WhichOneof("value")
    if which == "string_value":
        text = value.string_value
        return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS]
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        return _double(value.double_value)
    if which == "bool_value":
        return value.bool_value
    if which is None:
        return None
    if depth >= MAX_DEPTH:
        return TRUNCATED_DEPTH_MARKER
    if which == "array_value":
        return [any_value_to_json(item, depth + 1) for item in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value_to_json(kv.value, depth + 1) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        raw = value.bytes_value[:MAX_VALUE_CHARS]
        return {"bytesValue": base64.b64encode(raw).decode("ascii")}
    return None


def attributes_to_json(attributes: Iterable[KeyValue]) -> tuple[dict[str, Any], int]:
    """All attributes as key → value, and how many were dropped by the count limit."""
    result, dropped, _ = _convert(attributes, None)
    return result, dropped


def span_attributes_to_json(
    attributes: Iterable[KeyValue],
) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """Like attributes_to_json, and also the typed columns of the SPEC attributes present.

    Typing happens in the same loop, only for the keys present, because it is the hot path:
    typing in SQL on insert (json_extract_string with 26 paths plus lenient casts) was measured
    at ~35 µs per row against ~3 µs here."""
    return _convert(attributes, TYPED_ATTRIBUTES)


def _convert(
    attributes: Iterable[KeyValue], typed_spec: dict[str, Any] | None,
) -> tuple[dict[str, Any], int, dict[str, Any]]:
    result: dict[str, Any] = {}
    typed: dict[str, Any] = {}
    dropped = 0
    # The hot loop of ingest: scalar values are read inline (one call per attribute fewer);
    # everything else goes through any_value_to_json.
    for kv in attributes:
        key = kv.key
        if len(result) >= MAX_ATTRIBUTES and key not in result:
            dropped += 1
            continue
        value = kv.value
        which = value.WhichOneof("value")
        if which == "string_value":
            converted: Any = value.string_value
            if len(converted) > MAX_VALUE_CHARS:
                converted = converted[:MAX_VALUE_CHARS]
        elif which == "int_value":
            converted = value.int_value
        else:
            converted = any_value_to_json(value)
        result[key] = converted
        if typed_spec is not None:
            spec = typed_spec.get(key)
            if spec is not None:
                typed[spec[0]] = spec[1](converted)
    if typed_spec is not None:
        pick_grpc_status(typed)
    return result, dropped, typed
