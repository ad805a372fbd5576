"""OTLP JSON → protobuf objects, span by span.

OTLP JSON differs from the proto3 JSON mapping in ways `json_format.Parse` gets silently wrong:
trace and span ids are hex, not base64 (Parse would base64-decode "5b8efff7..." into 24 bytes
of garbage). Ids are therefore checked and converted here before each span is parsed, and each
span is parsed on its own so that one bad span is refused alone, with its position.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from google.protobuf.json_format import ParseDict, ParseError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

from ingest.flatten import locate
from ingest.rejections import Rejection

_HEX = re.compile(r"[0-9a-fA-F]*")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
_LINK_ID_FIELDS = ("traceId", "spanId")
# proto3 JSON accepts the original field names too; exporters in the wild send both.
_ALIASES = {"resource_spans": "resourceSpans", "scope_spans": "scopeSpans",
            "trace_id": "traceId", "span_id": "spanId", "parent_span_id": "parentSpanId",
            "instrumentationLibrarySpans": "scopeSpans"}


class NotOtlpJson(ValueError):
    """The document is JSON but not an ExportTraceServiceRequest."""


def _get(document: dict[str, Any], name: str) -> Any:
    if name in document:
        return document[name]
    for alias, canonical in _ALIASES.items():
        if canonical == name and alias in document:
            return document[alias]
    return None


def _hex_id_to_base64(value: Any, field: str) -> str:
    """proto3 JSON wants base64 bytes; OTLP JSON sends hex. Raise ValueError naming the field."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a hex string, got {type(value).__name__}")
    if not _HEX.fullmatch(value) or len(value) % 2:
        hint = (" (it looks base64-encoded; OTLP JSON ids are hex)"
                if _BASE64.fullmatch(value) else "")
        raise ValueError(f"{field} {value[:40]!r} is not hex{hint}")
    return base64.b64encode(binascii.unhexlify(value)).decode("ascii")


def _with_base64_ids(span: dict[str, Any]) -> dict[str, Any]:
    converted = dict(span)
    for field in _ID_FIELDS:
        value = _get(span, field)
        for key in (field, *(a for a, c in _ALIASES.items() if c == field)):
            converted.pop(key, None)
        encoded = _hex_id_to_base64(value, field)
        if encoded:
            converted[field] = encoded
    links = span.get("links")
    if isinstance(links, list):
        converted_links = []
        for index, link in enumerate(links):
            if not isinstance(link, dict):
                raise ValueError(f"links[{index}] is not an object")
            link = dict(link)
            for field in _LINK_ID_FIELDS:
                link[field] = _hex_id_to_base64(_get(link, field), f"links[{index}].{field}")
            converted_links.append(link)
        converted["links"] = converted_links
    return converted


def _has_surrogate(value: Any) -> bool:
    """True when a string holds a lone surrogate: bytes that were not UTF-8 (decoded with
    surrogateescape) or a JSON escape such as \\udc80 that encodes no character."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(item) for item in value)
    return False


def _parse_into(document: Any, message: Any) -> None:
    ParseDict(document, message, ignore_unknown_fields=True)


def _scope_spans(
    document: Any, into: ScopeSpans, where: str, check_text: bool,
    rejections: list[Rejection],
) -> None:
    if not isinstance(document, dict):
        raise ValueError("scopeSpans entry is not an object")
    if document.get("scope") is not None:
        _parse_into(document["scope"], into.scope)
    if document.get("schemaUrl"):
        into.schema_url = str(document["schemaUrl"])
    spans = document.get("spans") or []
    if not isinstance(spans, list):
        raise ValueError("spans is not a list")
    for index, span in enumerate(spans):
        try:
            if not isinstance(span, dict):
                raise ValueError("span is not an object")
            if check_text and _has_surrogate(span):
                raise ValueError("text is not valid UTF-8")
            converted = _with_base64_ids(span)
        except (ValueError, RecursionError) as error:
            rejections.append(_span_rejection(span, error, locate(where, f"span {index}")))
            continue
        target = into.spans.add()
        try:
            _parse_into(converted, target)
        except (ParseError, ValueError, TypeError, RecursionError) as error:
            del into.spans[-1]  # ParseDict fills the message in place; drop the half-parsed span
            rejections.append(_span_rejection(span, error, locate(where, f"span {index}")))


def _span_rejection(span: Any, error: Exception, where: str) -> Rejection:
    name = span.get("name") if isinstance(span, dict) else None
    label = f"span {name!r}" if isinstance(name, str) else "span"
    if isinstance(error, RecursionError):
        error = ValueError("values nested too deeply")
    return Rejection("bad_span", f"{label} refused: {error}", where)


def request_from_json(
    document: Any, where: str = "", check_text: bool = True
) -> tuple[ExportTraceServiceRequest, list[Rejection]]:
    """An OTLP JSON ExportTraceServiceRequest (already json-decoded) as protobuf objects.

    Raises NotOtlpJson when the document's shape is not a request at all."""
    if not isinstance(document, dict):
        kind = type(document).__name__
        raise NotOtlpJson(f"expected a JSON object with resourceSpans, got {kind}")
    resource_spans_list = _get(document, "resourceSpans")
    if resource_spans_list is None:
        if document:
            raise NotOtlpJson("JSON object has no resourceSpans: not an OTLP trace export")
        resource_spans_list = []
    if not isinstance(resource_spans_list, list):
        raise NotOtlpJson("resourceSpans is not a list")
    request = ExportTraceServiceRequest()
    rejections: list[Rejection] = []
    for index, resource_document in enumerate(resource_spans_list):
        here = locate(where, f"resource {index}")
        resource_spans = request.resource_spans.add()
        try:
            _resource_spans(resource_document, resource_spans, here, check_text, rejections)
        except (ParseError, ValueError, TypeError, RecursionError) as error:
            if isinstance(error, RecursionError):
                error = ValueError("values nested too deeply")
            spans = _count_spans(resource_document)
            rejections.append(Rejection(
                "bad_resource", f"resource and its {spans} spans refused: {error}", here, spans))
            del request.resource_spans[-1]
    return request, rejections


def _resource_spans(
    document: Any, into: ResourceSpans, where: str, check_text: bool,
    rejections: list[Rejection],
) -> None:
    if not isinstance(document, dict):
        raise ValueError("resourceSpans entry is not an object")
    if check_text and _has_surrogate(document.get("resource")):
        raise ValueError("resource text is not valid UTF-8")
    if document.get("resource") is not None:
        _parse_into(document["resource"], into.resource)
    if document.get("schemaUrl"):
        into.schema_url = str(document["schemaUrl"])
    scope_spans_list = _get(document, "scopeSpans") or []
    if not isinstance(scope_spans_list, list):
        raise ValueError("scopeSpans is not a list")
    for index, scope_document in enumerate(scope_spans_list):
        here = locate(where, f"scope {index}")
        scope_spans = into.scope_spans.add()
        try:
            _scope_spans(scope_document, scope_spans, here, check_text, rejections)
        except (ParseError, ValueError, TypeError, RecursionError) as error:
            spans = _count_spans({"scopeSpans": [scope_document]})
            rejections.append(Rejection(
                "bad_scope", f"scope and its {spans} spans refused: {error}", here, spans))
            del into.scope_spans[-1]


def _count_spans(resource_document: Any) -> int:
    try:
        return sum(len(scope.get("spans") or [])
                   for scope in _get(resource_document, "scopeSpans") or [])
    except (AttributeError, TypeError):
        return 0
