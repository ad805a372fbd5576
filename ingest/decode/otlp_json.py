"""OTLP JSON → rows, directly, span by span.

OTLP JSON differs from the proto3 JSON mapping in ways `json_format.Parse` gets silently wrong:
trace and span ids are hex, not base64 (Parse would base64-decode "5b8efff7..." into 24 bytes
of garbage). `json_format.ParseDict` is also slow: ~600 µs a span measured here, against tens
of µs for reading the decoded dicts directly as below, so spans never become protobuf objects;
resources and scopes (a few per request, and cached) still do, so that a resource gets the same
id whether it arrived as JSON or as protobuf. Each span is checked on its own, so one bad span
is refused alone, with its position. Field names are accepted in lowerCamelCase and in the
proto's snake_case, enums as numbers or names, 64-bit integers as strings or numbers; unknown
fields are ignored.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any

from google.protobuf.json_format import ParseDict, ParseError
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from ingest.decode.any_value import (
    DROPPED_ELEMENTS_KEY,
    MAX_ATTRIBUTES,
    MAX_DEPTH,
    MAX_EVENTS,
    MAX_KEY_CHARS,
    MAX_LINKS,
    MAX_NAME_CHARS,
    MAX_VALUE_CHARS,
    TRUNCATED_DEPTH_MARKER,
    ElementBudget,
    dropped_elements_marker,
)
from ingest.decode.bounded_cache import BoundedCache
from ingest.decode.flatten import (
    DEFAULT_MAX_FUTURE_NS,
    INT64_MAX,
    UINT32_MAX,
    append_span,
    dumps,
    field_problem,
    id_problem,
    latest_acceptable_start_ns,
    locate,
    refuse,
    resource_row,
    scope_row,
    time_problem,
)
from store import EXCEPTION_EVENT, TYPED_ATTRIBUTES, FlatBatch, Rejection, merge_named_columns

_HEX = re.compile(r"[0-9a-fA-F]*")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_SPAN_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
               "SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_VALUE_KINDS = {"stringValue": "string", "string_value": "string", "intValue": "int",
                "int_value": "int", "doubleValue": "double", "double_value": "double",
                "boolValue": "bool", "bool_value": "bool", "arrayValue": "array",
                "array_value": "array", "kvlistValue": "kvlist", "kvlist_value": "kvlist",
                "bytesValue": "bytes", "bytes_value": "bytes"}
_ROW_CACHE_LIMIT = 1024


class NotOtlpJson(ValueError):
    """The document is JSON but not an ExportTraceServiceRequest."""


class _BadSpan(ValueError):
    """This span cannot be stored; the message says why."""


def _get(document: dict[str, Any], camel: str, snake: str) -> Any:
    value = document.get(camel)
    return document.get(snake) if value is None else value


def _hex_id(value: Any, field: str) -> bytes:
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        raise _BadSpan(f"{field} must be a hex string, got {type(value).__name__}")
    if not _HEX.fullmatch(value) or len(value) % 2:
        hint = (" (it looks base64-encoded; OTLP JSON ids are hex)"
                if _BASE64.fullmatch(value) else "")
        raise _BadSpan(f"{field} {value[:40]!r} is not hex{hint}")
    return binascii.unhexlify(value)


def _integer(value: Any, field: str, default: int = 0) -> int:
    """A 64-bit integer sent as a number or a decimal string."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise _BadSpan(f"{field} must be an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise _BadSpan(f"{field} {str(value)[:40]!r} is not an integer")


def _count(value: Any, field: str) -> int:
    """A dropped-items count, saturated to the UINTEGER column's range."""
    return min(max(_integer(value, field), 0), UINT32_MAX)


def _enum(value: Any, names: dict[str, int], field: str) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    return _integer(value, field)


def _double(value: Any) -> float | str:
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return value
    number = float(value)
    if math.isfinite(number):
        return number
    return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")


def any_value(value: Any, depth: int = 0, budget: ElementBudget | None = None) -> Any:
    """An OTLP JSON AnyValue ({"stringValue": "x"}, …) as the stored JSON value (the same
    representation ingest.decode.any_value gives a protobuf AnyValue)."""
    if not isinstance(value, dict):
        raise _BadSpan("an attribute value is not an AnyValue object")
    for key, content in value.items():
        kind = _VALUE_KINDS.get(key)
        if kind is None:
            continue
        if kind == "string":
            if not isinstance(content, str):
                raise _BadSpan("stringValue is not a string")
            return content if len(content) <= MAX_VALUE_CHARS else content[:MAX_VALUE_CHARS]
        if kind == "int":
            return _integer(content, "intValue")
        if kind == "double":
            try:
                return _double(content)
            except (TypeError, ValueError):
                raise _BadSpan(f"doubleValue {str(content)[:40]!r} is not a number") from None
        if kind == "bool":
            return bool(content)
        if depth >= MAX_DEPTH:
            return TRUNCATED_DEPTH_MARKER
        values = content.get("values") if isinstance(content, dict) else None
        if values is not None and not isinstance(values, list):
            raise _BadSpan(f"{key}.values is not a list")
        if kind == "array" or kind == "kvlist":
            return _elements(kind, values or [], depth, budget or ElementBudget())
        if kind == "bytes":
            try:
                raw = base64.b64decode(content, validate=True)[:MAX_VALUE_CHARS]
            except (binascii.Error, TypeError, ValueError):
                raise _BadSpan("bytesValue is not base64") from None
            return {"bytesValue": base64.b64encode(raw).decode("ascii")}
    return None


def _elements(kind: str, values: list[Any], depth: int, budget: ElementBudget) -> Any:
    """An array's or kvlist's elements within the element limit (as ingest/decode/any_value.py)."""
    if kind == "kvlist":
        values = [kv for kv in values if isinstance(kv, dict)]
    array: list[Any] = []
    kvlist: dict[str, Any] = {}
    for index, item in enumerate(values):
        if budget.left <= 0:
            if kind == "array":
                array.append(dropped_elements_marker(len(values) - index))
            else:
                kvlist[DROPPED_ELEMENTS_KEY] = len(values) - index
            break
        budget.left -= 1
        if kind == "array":
            array.append(any_value(item, depth + 1, budget))
        else:
            kvlist[str(item.get("key", ""))] = any_value(item.get("value") or {}, depth + 1,
                                                         budget)
    return array if kind == "array" else kvlist


def attributes(items: Any, typed: dict[str, Any] | None = None) -> tuple[dict[str, Any], int]:
    """key → value and the count dropped by the limit; fills `typed` with the typed columns."""
    if items is None:
        return {}, 0
    if not isinstance(items, list):
        raise _BadSpan("attributes is not a list")
    result: dict[str, Any] = {}
    dropped = 0
    for item in items:
        if not isinstance(item, dict):
            raise _BadSpan("an attribute is not a key/value object")
        key = item.get("key")
        if not isinstance(key, str):
            raise _BadSpan("an attribute has no string key")
        if (len(result) >= MAX_ATTRIBUTES and key not in result) or len(key) > MAX_KEY_CHARS:
            dropped += 1
            continue
        value = any_value(item.get("value") or {})
        result[key] = value
        if typed is not None:
            spec = TYPED_ATTRIBUTES.get(key)
            if spec is not None:
                typed[spec[0]] = spec[1](value)
    if typed is not None:
        merge_named_columns(typed)
    return result, dropped


def _events(span: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    events: list[dict[str, Any]] = []
    exception_types: list[str] = []
    for event in _list(span, "events", "events", "events")[:MAX_EVENTS]:
        if not isinstance(event, dict):
            raise _BadSpan("an event is not an object")
        values, dropped = attributes(event.get("attributes"))
        name = str(event.get("name") or "")[:MAX_NAME_CHARS]
        events.append({
            # Clamped into BIGINT's range, as the protobuf path does.
            "time_ns": min(max(_integer(_get(event, "timeUnixNano", "time_unix_nano"),
                                        "timeUnixNano"), 0), INT64_MAX),
            "name": name,
            "attributes": dumps(values),
            "dropped_attributes_count": min(dropped + _count(
                _get(event, "droppedAttributesCount", "dropped_attributes_count"),
                "droppedAttributesCount"), UINT32_MAX),
        })
        if name == EXCEPTION_EVENT:
            exception_type = values.get("exception.type")
            if isinstance(exception_type, str) and exception_type:
                exception_types.append(exception_type)
    return events, exception_types


def _links(span: dict[str, Any]) -> list[dict[str, Any]]:
    links: list[dict[str, Any]] = []
    for index, link in enumerate(_list(span, "links", "links", "links")[:MAX_LINKS]):
        if not isinstance(link, dict):
            raise _BadSpan(f"links[{index}] is not an object")
        values, dropped = attributes(link.get("attributes"))
        links.append({
            "trace_id": _hex_id(_get(link, "traceId", "trace_id"), f"links[{index}].traceId").hex(),
            "span_id": _hex_id(_get(link, "spanId", "span_id"), f"links[{index}].spanId").hex(),
            "trace_state": str(_get(link, "traceState", "trace_state") or ""),
            "flags": min(max(_integer(link.get("flags"), "flags"), 0), UINT32_MAX),
            "attributes": dumps(values),
            "dropped_attributes_count": min(dropped + _count(
                _get(link, "droppedAttributesCount", "dropped_attributes_count"),
                "droppedAttributesCount"), UINT32_MAX),
        })
    return links


def has_surrogate(value: Any) -> bool:
    """True when a string holds a lone surrogate: bytes that were not UTF-8 (decoded with
    surrogateescape) or a JSON escape such as \\udc80 that encodes no character."""
    # A loop, not recursion: a value nested deeper than Python's recursion limit must be
    # checked too (and then cut at MAX_DEPTH like any other), not refused for its depth.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


_SURROGATE = re.compile("[\ud800-\udfff]")


def _replaced(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def replace_surrogates(value: Any) -> Any:
    """`value` with every string's lone surrogates (bytes that were not UTF-8, or escapes that
    encode no character) replaced by U+FFFD. Nested no deeper than has_surrogate walks: a
    resource deeper than the recursion limit is refused by the caller's RecursionError."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return _replaced(value)
    if isinstance(value, dict):
        return {replace_surrogates(key): replace_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [replace_surrogates(item) for item in value]
    return value


# Shared by the receiver threads (ingest/decode/bounded_cache.py says why reads take no lock).
_message_rows: BoundedCache[str, tuple[str, tuple[Any, ...]]] = BoundedCache(_ROW_CACHE_LIMIT)


def _message_row(kind: str, document: Any, schema_url: str) -> tuple[str, tuple[Any, ...]]:
    """The resource or scope row, via its protobuf form, so that ids match the binary path."""
    key = kind + "\0" + schema_url + "\0" + json.dumps(document, sort_keys=True)
    row = _message_rows.get(key)
    if row is None:
        message: Any = Resource() if kind == "resource" else InstrumentationScope()
        if document is not None:
            ParseDict(document, message, ignore_unknown_fields=True)
        build = resource_row if kind == "resource" else scope_row
        row = _message_rows.put(key, build(message, schema_url))
    return row


def _span(document: Any, batch: FlatBatch, resource_id: str, scope_id: str,
          service_name: str | None, latest_start_ns: int, check_text: bool, where: str) -> bool:
    """Append one span; False (and a rejection) when it is refused."""
    name = document.get("name") if isinstance(document, dict) else None
    try:
        if not isinstance(document, dict):
            raise _BadSpan("span is not an object")
        if check_text and has_surrogate(document):
            raise _BadSpan("text is not valid UTF-8")
        trace_id = _hex_id(_get(document, "traceId", "trace_id"), "traceId")
        span_id = _hex_id(_get(document, "spanId", "span_id"), "spanId")
        parent = _hex_id(_get(document, "parentSpanId", "parent_span_id"), "parentSpanId")
        start = _integer(_get(document, "startTimeUnixNano", "start_time_unix_nano"),
                         "startTimeUnixNano")
        end = _integer(_get(document, "endTimeUnixNano", "end_time_unix_nano"),
                       "endTimeUnixNano")
        flags = _integer(document.get("flags"), "flags")
        kind = _enum(document.get("kind"), _SPAN_KINDS, "kind")
        status = document.get("status") or {}
        if not isinstance(status, dict):
            raise _BadSpan("status is not an object")
        status_code = _enum(status.get("code"), _STATUS_CODES, "status.code")
        problem = (id_problem(trace_id, span_id, parent)
                   or time_problem(start, end, latest_start_ns)
                   or field_problem(flags, kind, status_code))
        if problem:
            refuse(batch, str(name or ""), problem, where)
            return False
        typed: dict[str, Any] = {}
        values, dropped = attributes(document.get("attributes"), typed)
        events, exception_types = _events(document)
        links = _links(document)
        row = (
            trace_id, span_id, parent,
            str(_get(document, "traceState", "trace_state") or ""),
            flags, str(name or "")[:MAX_NAME_CHARS], kind, start, end, status_code,
            str(status.get("message") or ""), resource_id, scope_id, service_name, values,
            dropped + _count(_get(document, "droppedAttributesCount",
                                  "dropped_attributes_count"), "droppedAttributesCount"),
            typed, events, exception_types,
            _count(_get(document, "droppedEventsCount", "dropped_events_count"),
                   "droppedEventsCount") + _beyond(document, "events", MAX_EVENTS),
            links,
            _count(_get(document, "droppedLinksCount", "dropped_links_count"),
                   "droppedLinksCount") + _beyond(document, "links", MAX_LINKS),
        )
    except (ValueError, TypeError, AttributeError, RecursionError) as error:
        # _BadSpan says what is wrong; anything else is a shape we did not foresee, refused
        # with the span rather than failing the request (the fuzz tests look for those).
        message: Any = ("values nested too deeply" if isinstance(error, RecursionError)
                        else error if isinstance(error, _BadSpan)
                        else f"malformed span ({type(error).__name__}: {error})"[:300])
        label = f"span {name!r}" if isinstance(name, str) else "span"
        batch.rejections.append(Rejection("bad_span", f"{label} refused: {message}", where))
        return False
    append_span(batch, *row, where=where)
    return True


def _beyond(document: dict[str, Any], field: str, limit: int) -> int:
    """How many events or links a span holds past the limit (dropped and counted)."""
    return max(len(_list(document, field, field, field)) - limit, 0)


def _list(document: dict[str, Any], camel: str, snake: str, what: str) -> list[Any]:
    value = _get(document, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _BadSpan(f"{what} is not a list")
    return value


def export_entries(document: Any, camel: str, snake: str, export: str) -> list[Any]:
    """The top-level list of an export request (`resourceSpans`, `resourceLogs`, either
    spelling); NotOtlpJson when the document is not such an export (`export`: "trace",
    "logs"). An empty object is an empty export."""
    if not isinstance(document, dict):
        kind = type(document).__name__
        raise NotOtlpJson(f"expected a JSON object with {camel}, got {kind}")
    entries = _get(document, camel, snake)
    if entries is None:
        if document:
            raise NotOtlpJson(f"JSON object has no {camel}: not an OTLP {export} export")
        return []
    if not isinstance(entries, list):
        raise NotOtlpJson(f"{camel} is not a list")
    return entries


def count_entries(resource_document: Any, scopes: tuple[str, str],
                  entries: tuple[str, str]) -> int:
    """How many spans (records) a resource holds, for the message that refuses them all: 0
    when its shape is too broken to count."""
    try:
        return sum(len(_get(scope, *entries) or [])
                   for scope in _get(resource_document, *scopes) or [])
    except (AttributeError, TypeError, ValueError):
        return 0


def check_request_shape(document: Any) -> list[Any]:
    """The resourceSpans list; NotOtlpJson when the document is not a trace export."""
    return export_entries(document, "resourceSpans", "resource_spans", "trace")


def flatten_json_request(
    document: Any, *, where: str = "", check_text: bool = True,
    max_future_ns: int = DEFAULT_MAX_FUTURE_NS, into: FlatBatch | None = None,
) -> FlatBatch:
    """An OTLP JSON ExportTraceServiceRequest (already json-decoded) as rows. Raises
    NotOtlpJson when the document is not a trace export at all."""
    batch = into if into is not None else FlatBatch()
    latest = latest_acceptable_start_ns(max_future_ns)
    for index, resource_document in enumerate(check_request_shape(document)):
        here = locate(where, f"resource {index}")
        try:
            if not isinstance(resource_document, dict):
                raise _BadSpan("resourceSpans entry is not an object")
            resource = resource_document.get("resource")
            schema_url = str(_get(resource_document, "schemaUrl", "schema_url") or "")
            if check_text and (has_surrogate(resource) or has_surrogate(schema_url)):
                # Kept with the bad text replaced, so that its spans keep their service.name
                # (they were refused with it before).
                resource, schema_url = replace_surrogates(resource), replace_surrogates(schema_url)
                batch.rejections.append(Rejection(
                    "resource_text_replaced", "resource text held invalid UTF-8: kept with each "
                    "bad sequence replaced by U+FFFD", here, 0))
            resource_id, resource_values = _message_row("resource", resource, schema_url)
            scopes = _list(resource_document, "scopeSpans", "scope_spans", "scopeSpans") or \
                _list(resource_document, "instrumentationLibrarySpans",
                      "instrumentation_library_spans", "instrumentationLibrarySpans")
        except (_BadSpan, ParseError, ValueError, TypeError, RecursionError) as error:
            spans = count_entries(resource_document, ("scopeSpans", "scope_spans"),
                                  ("spans", "spans"))
            batch.rejections.append(Rejection(
                "bad_resource", f"resource and its {spans} spans refused: {error}", here, spans))
            continue
        used = False
        for scope_index, scope_document in enumerate(scopes):
            scope_here = locate(here, f"scope {scope_index}")
            try:
                if not isinstance(scope_document, dict):
                    raise _BadSpan("scopeSpans entry is not an object")
                scope = scope_document.get("scope") or scope_document.get(
                    "instrumentationLibrary")
                scope_url = str(_get(scope_document, "schemaUrl", "schema_url") or "")
                # Checked before ParseDict: protobuf fails on a lone surrogate in a key with
                # a SystemError, not a ParseError (found by tests/ingest/test_fuzz_decoders.py).
                if check_text and (has_surrogate(scope) or has_surrogate(scope_url)):
                    raise _BadSpan("scope text is not valid UTF-8")
                scope_id, scope_values = _message_row("scope", scope, scope_url)
                spans = _list(scope_document, "spans", "spans", "spans")
            except (_BadSpan, ParseError, ValueError, TypeError, RecursionError) as error:
                spans_value = scope_document.get("spans") if isinstance(
                    scope_document, dict) else None
                count = len(spans_value) if isinstance(spans_value, list) else 0
                batch.rejections.append(Rejection(
                    "bad_scope", f"scope and its {count} spans refused: {error}", scope_here,
                    count))
                continue
            kept = 0
            for span_index, span in enumerate(spans):
                kept += _span(span, batch, resource_id, scope_id, resource_values[1], latest,
                              check_text, locate(scope_here, f"span {span_index}"))
            if kept:
                batch.scopes[scope_id] = scope_values
                used = True
        if used:
            batch.resources[resource_id] = resource_values
    return batch
