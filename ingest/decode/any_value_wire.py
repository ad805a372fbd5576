"""A serialized KeyValue → (key, stored JSON value), read from the wire format within limits.

ingest/decode/any_value.py converts the generated classes' objects; but the protobuf runtime parses
a
message whole before anything can be read from it, so a 60 MB array became ~5 million objects
before the element limit could drop them (peak 1.1 GB in `serve`), and a value nested deeper
than the runtime's recursion limit (100) could not be parsed at all: the span was refused
instead of keeping the depth marker docs/storage.md documents. Walking the wire format
reads only what is kept: elements past MAX_VALUE_ELEMENTS are counted, not parsed, and levels
past MAX_DEPTH are skipped. The result is the same as any_value.py's for every message both
can read (tests/ingest/test_limits.py compares them).

Used by the fast path (ingest/decode/proto_flatten.py) for the attributes the runtime would struggle
with: large ones, and those it refuses.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from google.protobuf.message import DecodeError

from ingest.decode.any_value import (
    DROPPED_ELEMENTS_KEY,
    MAX_DEPTH,
    MAX_VALUE_CHARS,
    TRUNCATED_DEPTH_MARKER,
    ElementBudget,
    _double,
    dropped_elements_marker,
)
from ingest.decode.protowire import FIXED64, LENGTH_DELIMITED, VARINT, WireError, iter_fields

# AnyValue's fields (opentelemetry/proto/common/v1/common.proto)
_STRING, _BOOL, _INT, _DOUBLE, _ARRAY, _KVLIST, _BYTES = 1, 2, 3, 4, 5, 6, 7
_ONEOF = {_STRING: LENGTH_DELIMITED, _BOOL: VARINT, _INT: VARINT, _DOUBLE: FIXED64,
          _ARRAY: LENGTH_DELIMITED, _KVLIST: LENGTH_DELIMITED, _BYTES: LENGTH_DELIMITED}
_unpack_double = struct.Struct("<d").unpack_from


def _text(data: memoryview, lenient: bool = False) -> str:
    try:
        return str(data, "utf-8", "replace" if lenient else "strict")
    except UnicodeDecodeError as error:
        raise DecodeError(f"invalid UTF-8 in a string field: {error}") from None


def _varint(data: memoryview) -> int:
    result = shift = 0
    for byte in data:
        result |= (byte & 0x7F) << shift
        shift += 7
    return result


def _fields(data: memoryview) -> Any:
    try:
        yield from iter_fields(data)  # type: ignore[arg-type]
    except WireError as error:
        raise DecodeError(str(error)) from None


def _value_field(data: memoryview) -> tuple[int, memoryview] | None:
    """The oneof member set last (as the runtime keeps it), or None when unset."""
    found = None
    for field, wire_type, start, end in _fields(data):
        if _ONEOF.get(field) == wire_type:
            found = (field, data[start:end])
    return found


def _convert(data: memoryview, depth: int, budget: ElementBudget | None,
             lenient: bool = False) -> Any:
    found = _value_field(data)
    if found is None:
        return None
    field, content = found
    if field == _STRING:
        return _text(content, lenient)[:MAX_VALUE_CHARS]  # all checked, as the runtime does
    if field == _INT:
        number = _varint(content) & (2**64 - 1)
        return number - 2**64 if number >= 2**63 else number
    if field == _DOUBLE:
        return _double(_unpack_double(content)[0])
    if field == _BOOL:
        return _varint(content) != 0
    if depth >= MAX_DEPTH:
        return TRUNCATED_DEPTH_MARKER
    if field == _BYTES:
        return {"bytesValue": base64.b64encode(bytes(content[:MAX_VALUE_CHARS])).decode("ascii")}
    budget = budget or ElementBudget()
    array: list[Any] = []
    kvlist: dict[str, Any] = {}
    for number, wire_type, start, end in _fields(content):
        if number != 1 or wire_type != LENGTH_DELIMITED:
            continue
        if budget.left <= 0:
            # Counted, never sliced or parsed: 5 million elements cost seconds, not a gigabyte.
            dropped = 1 + _count_elements(content, end)
            if field == _ARRAY:
                array.append(dropped_elements_marker(dropped))
            else:
                kvlist[DROPPED_ELEMENTS_KEY] = dropped
            break
        budget.left -= 1
        if field == _ARRAY:
            array.append(_convert(content[start:end], depth + 1, budget, lenient))
        else:
            key, value = _key_value(content[start:end], depth + 1, budget, lenient)
            kvlist[key] = value
    return array if field == _ARRAY else kvlist


def _count_elements(data: memoryview, pos: int) -> int:
    """How many elements (field 1, length-delimited) follow `pos`: the rest of the fields are
    stepped over with the lengths read inline (iter_fields costs ~3x more per field)."""
    count = 0
    size = len(data)
    while pos < size:
        tag = data[pos]
        if tag & 0x80:  # a multi-byte tag: not an element, take the general walk
            return count + sum(1 for number, wire_type, _, _ in _fields(data[pos:])
                               if number == 1 and wire_type == LENGTH_DELIMITED)
        pos += 1
        wire_type = tag & 7
        if wire_type == LENGTH_DELIMITED:
            length = shift = 0
            while True:
                if pos >= size:
                    raise DecodeError("truncated varint in an array")
                byte = data[pos]
                pos += 1
                length |= (byte & 0x7F) << shift
                if not byte & 0x80:
                    break
                shift += 7
            pos += length
            count += tag >> 3 == 1
        else:
            return count + sum(1 for number, wire_type, _, _ in _fields(data[pos - 1:])
                               if number == 1 and wire_type == LENGTH_DELIMITED)
    if pos > size:
        raise DecodeError("an element runs past the end of its array")
    return count


def _key_value(data: memoryview, depth: int, budget: ElementBudget | None,
               lenient: bool = False) -> tuple[str, Any]:
    key = ""
    value: memoryview | None = None
    for field, wire_type, start, end in _fields(data):
        if wire_type != LENGTH_DELIMITED:
            continue
        if field == 1:
            key = _text(data[start:end], lenient)
        elif field == 2:
            value = data[start:end]
    return key, (None if value is None else _convert(value, depth, budget, lenient))


def key_value_from_wire(raw: bytes, *, lenient: bool = False) -> tuple[str, Any]:
    """(key, value as any_value.py stores it) of one serialized KeyValue. Raises DecodeError
    for bytes that are not a KeyValue, or that hold invalid UTF-8 unless `lenient`: then each
    bad sequence becomes U+FFFD (the replacement character)."""
    return _key_value(memoryview(raw), 0, None, lenient)


def key_from_wire(raw: bytes) -> str:
    """Only the key of a serialized KeyValue (for attributes past the count limit, which are
    dropped unread unless they repeat a kept key). Raises DecodeError."""
    data = memoryview(raw)
    for field, wire_type, start, end in _fields(data):
        if field == 1 and wire_type == LENGTH_DELIMITED:
            return _text(data[start:end])
    return ""
