"""OTLP JSON ExportLogsServiceRequest → rows of `log_records`, record by record.

The same rules as for spans (ingest/decode/otlp_json.py): ids are hex (a base64 id is refused with a
hint), enums numbers or names, 64-bit integers strings or numbers, field names lowerCamelCase
or snake_case, unknown fields ignored; one bad record is refused alone with its position.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.json_format import ParseError

from ingest.decode.flatten import DEFAULT_MAX_FUTURE_NS, latest_acceptable_start_ns, locate
from ingest.decode.log_flatten import SEVERITY_NAMES, BadLogRecord, append_log_record, refuse_log
from ingest.decode.otlp_json import (
    _count,
    _enum,
    _get,
    _hex_id,
    _integer,
    _list,
    _message_row,
    any_value,
    attributes,
    count_entries,
    export_entries,
    has_surrogate,
)
from store import FlatBatch


def is_logs_document(document: Any) -> bool:
    """True when a JSON request is a logs export (it holds resourceLogs)."""
    return isinstance(document, dict) and _get(document, "resourceLogs",
                                               "resource_logs") is not None


def check_logs_shape(document: Any) -> list[Any]:
    """The resourceLogs list; NotOtlpJson when the document is not a logs export."""
    return export_entries(document, "resourceLogs", "resource_logs", "logs")


def _record(document: Any, batch: FlatBatch, resource_id: str, scope_id: str,
            service_name: str | None, latest_ns: int, check_text: bool) -> None:
    """Append one record. Raises ValueError (BadLogRecord and the JSON helpers' errors)."""
    if not isinstance(document, dict):
        raise BadLogRecord("log record is not an object")
    if check_text and has_surrogate(document):
        raise BadLogRecord("text is not valid UTF-8")
    values, dropped = attributes(document.get("attributes"))
    body = document.get("body")
    has_body = isinstance(body, dict) and bool(body)
    append_log_record(
        batch,
        trace_id=_hex_id(_get(document, "traceId", "trace_id"), "traceId"),
        span_id=_hex_id(_get(document, "spanId", "span_id"), "spanId"),
        time_ns=_integer(_get(document, "timeUnixNano", "time_unix_nano"), "timeUnixNano"),
        observed_ns=_integer(_get(document, "observedTimeUnixNano", "observed_time_unix_nano"),
                             "observedTimeUnixNano"),
        severity_number=_enum(_get(document, "severityNumber", "severity_number"),
                              SEVERITY_NAMES, "severityNumber"),
        severity_text=str(_get(document, "severityText", "severity_text") or ""),
        body=any_value(body) if has_body else None, has_body=has_body,
        attributes=values,
        dropped_attributes=dropped + _count(
            _get(document, "droppedAttributesCount", "dropped_attributes_count"),
            "droppedAttributesCount"),
        flags=_integer(document.get("flags"), "flags"),
        event_name=str(_get(document, "eventName", "event_name") or ""),
        resource_id=resource_id, scope_id=scope_id, service_name=service_name,
        latest_ns=latest_ns)


def flatten_json_logs(
    document: Any, *, where: str = "", check_text: bool = True,
    max_future_ns: int = DEFAULT_MAX_FUTURE_NS, into: FlatBatch | None = None,
) -> FlatBatch:
    """An OTLP JSON logs request (already json-decoded) as rows. Raises NotOtlpJson when the
    document is not a logs export at all."""
    batch = into if into is not None else FlatBatch()
    latest = latest_acceptable_start_ns(max_future_ns)
    for index, resource_document in enumerate(check_logs_shape(document)):
        here = locate(where, f"resource {index}")
        try:
            if not isinstance(resource_document, dict):
                raise BadLogRecord("resourceLogs entry is not an object")
            resource = resource_document.get("resource")
            schema_url = str(_get(resource_document, "schemaUrl", "schema_url") or "")
            if check_text and (has_surrogate(resource) or has_surrogate(schema_url)):
                raise BadLogRecord("resource text is not valid UTF-8")
            resource_id, resource_values = _message_row("resource", resource, schema_url)
            scopes = _list(resource_document, "scopeLogs", "scope_logs", "scopeLogs")
        except (ParseError, ValueError, TypeError, RecursionError) as error:
            refuse_log(batch, "bad_resource", f"resource and its log records refused: {error}",
                       here, count_entries(resource_document, ("scopeLogs", "scope_logs"),
                                         ("logRecords", "log_records")))
            continue
        used = False
        for scope_index, scope_document in enumerate(scopes):
            scope_here = locate(here, f"scope {scope_index}")
            try:
                if not isinstance(scope_document, dict):
                    raise BadLogRecord("scopeLogs entry is not an object")
                scope = scope_document.get("scope")
                scope_url = str(_get(scope_document, "schemaUrl", "schema_url") or "")
                if check_text and (has_surrogate(scope) or has_surrogate(scope_url)):
                    raise BadLogRecord("scope text is not valid UTF-8")
                scope_id, scope_values = _message_row("scope", scope, scope_url)
                records = _list(scope_document, "logRecords", "log_records", "logRecords")
            except (ParseError, ValueError, TypeError, RecursionError) as error:
                records_value = (_get(scope_document, "logRecords", "log_records")
                                 if isinstance(scope_document, dict) else None)
                count = len(records_value) if isinstance(records_value, list) else 0
                refuse_log(batch, "bad_scope",
                           f"scope and its {count} log records refused: {error}", scope_here,
                           count)
                continue
            kept = 0
            for record_index, record in enumerate(records):
                try:
                    _record(record, batch, resource_id, scope_id, resource_values[1], latest,
                            check_text)
                    kept += 1
                except (ValueError, TypeError, AttributeError, RecursionError) as error:
                    message = ("values nested too deeply" if isinstance(error, RecursionError)
                               else str(error))[:300]
                    refuse_log(batch, "bad_log_record", f"log record refused: {message}",
                               locate(scope_here, f"log record {record_index}"))
            if kept:
                batch.scopes[scope_id] = scope_values
                used = True
        if used:
            batch.resources[resource_id] = resource_values
    return batch
