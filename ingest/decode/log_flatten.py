"""ExportLogsServiceRequest (protobuf objects or OTLP JSON dicts) → rows of `log_records`.

Log records share resources and scopes with spans (same ids, same tables) and go through the
same writer and transaction as spans (store/write/writer.py). Each record is checked on its own: a
bad one is refused alone, with its position, never its batch.

A log record's identity (so that a record sent twice is stored once) is a 128-bit digest of
what makes it that record: trace and span id, time, severity, body, attributes, event name and
resource. The observed time is left out when a time is set: a Collector that relays a record
may stamp its own.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, SeverityNumber

from ingest.decode.any_value import any_value_to_json, attributes_to_json
from ingest.decode.flatten import (
    DEFAULT_MAX_FUTURE_NS,
    INT64_MAX,
    UINT32_MAX,
    dumps,
    latest_acceptable_start_ns,
    locate,
    resource_row,
    scope_row,
)
from store import FlatBatch, Rejection

# Severity numbers OTLP defines (logs.proto SeverityNumber): 0 unspecified, 1-24.
MAX_SEVERITY = 24
SEVERITY_NAMES: dict[str, int] = dict(SeverityNumber.items())
_ZERO_TRACE_ID, _ZERO_SPAN_ID = bytes(16), bytes(8)


class BadLogRecord(ValueError):
    """This log record cannot be stored; the message says why."""


def refuse_log(batch: FlatBatch, reason: str, message: str, where: str, records: int = 1
               ) -> None:
    batch.rejections.append(Rejection(reason, message, where, spans=0, log_records=records))


def span_context(trace_id: bytes, span_id: bytes) -> tuple[bytes, bytes]:
    """The record's (trace id, span id), each b"" when absent. All-zero ids are OTLP's way of
    saying "no context" (the SDK's invalid span context); wrong lengths are refused."""
    if trace_id == _ZERO_TRACE_ID:
        trace_id = b""
    if span_id == _ZERO_SPAN_ID:
        span_id = b""
    if trace_id and len(trace_id) != 16:
        raise BadLogRecord(f"trace_id is {len(trace_id)} bytes, must be 16 or empty")
    if span_id and len(span_id) != 8:
        raise BadLogRecord(f"span_id is {len(span_id)} bytes, must be 8 or empty")
    if span_id and not trace_id:
        raise BadLogRecord("span_id without a trace_id")
    return trace_id, span_id


def append_log_record(
    batch: FlatBatch, *, trace_id: bytes, span_id: bytes, time_ns: int, observed_ns: int,
    severity_number: int, severity_text: str, body: Any, has_body: bool,
    attributes: dict[str, Any], dropped_attributes: int, flags: int, event_name: str,
    resource_id: str, scope_id: str, service_name: str | None, latest_ns: int,
) -> None:
    """Validate one decoded record and append it as a row. Raises BadLogRecord."""
    trace_id, span_id = span_context(trace_id, span_id)
    if not 0 <= severity_number <= MAX_SEVERITY:
        raise BadLogRecord(f"severity_number {severity_number} is not a SeverityNumber "
                           f"(0-{MAX_SEVERITY})")
    if not 0 <= flags <= UINT32_MAX:
        raise BadLogRecord(f"flags {flags} do not fit in 32 bits")
    when = time_ns or observed_ns
    if when <= 0:
        raise BadLogRecord("neither time_unix_nano nor observed_time_unix_nano is set")
    if when > INT64_MAX or observed_ns > INT64_MAX or observed_ns < 0:
        raise BadLogRecord("timestamp beyond year 2262")
    if when > latest_ns:
        raise BadLogRecord("time is in the future (more than the allowed clock skew ahead)")
    body_json = dumps(body) if has_body else None
    attributes_json = dumps(attributes)
    exception_type = attributes.get("exception.type")
    if not isinstance(exception_type, str) or not exception_type.strip():
        exception_type = None
    digest = hashlib.blake2b(b"\x00".join((
        trace_id, span_id, str(when).encode(), str(severity_number).encode(),
        severity_text.encode("utf-8", "surrogatepass"),
        (body_json or "").encode("utf-8", "surrogatepass"),
        json.dumps(attributes, sort_keys=True, ensure_ascii=True).encode(),
        event_name.encode("utf-8", "surrogatepass"), resource_id.encode(),
    )), digest_size=16).digest()
    columns = batch.logs
    columns["record_key_hi"].append(int.from_bytes(digest[:8], "big"))
    columns["record_key_lo"].append(int.from_bytes(digest[8:], "big"))
    columns["trace_id"].append(trace_id.hex() or None)
    columns["span_id"].append(span_id.hex() or None)
    columns["time_ns"].append(when)
    columns["observed_time_ns"].append(observed_ns)
    columns["severity_number"].append(severity_number)
    columns["severity_text"].append(severity_text)
    columns["body"].append(body_json)
    columns["attributes"].append(attributes_json)
    columns["dropped_attributes_count"].append(min(dropped_attributes, UINT32_MAX))
    columns["flags"].append(flags)
    columns["event_name"].append(event_name)
    columns["resource_id"].append(resource_id)
    columns["scope_id"].append(scope_id)
    columns["service_name"].append(service_name)
    columns["exception_type"].append(exception_type)
    batch.log_count += 1
    if not span_id:
        batch.logs_without_span += 1


def _record_from_message(record: LogRecord, batch: FlatBatch, resource_id: str, scope_id: str,
                         service_name: str | None, latest_ns: int) -> None:
    attributes, dropped = attributes_to_json(record.attributes)
    has_body = record.HasField("body") and record.body.WhichOneof("value") is not None
    append_log_record(
        batch, trace_id=record.trace_id, span_id=record.span_id, time_ns=record.time_unix_nano,
        observed_ns=record.observed_time_unix_nano, severity_number=record.severity_number,
        severity_text=record.severity_text,
        body=any_value_to_json(record.body) if has_body else None, has_body=has_body,
        attributes=attributes, dropped_attributes=record.dropped_attributes_count + dropped,
        flags=record.flags, event_name=record.event_name, resource_id=resource_id,
        scope_id=scope_id, service_name=service_name, latest_ns=latest_ns)


def flatten_resource_logs(resource_logs: ResourceLogs, batch: FlatBatch, *, where: str,
                          latest_ns: int) -> None:
    resource_id, resource_values = resource_row(resource_logs.resource,
                                                resource_logs.schema_url)
    used = False
    for scope_index, scope_logs in enumerate(resource_logs.scope_logs):
        scope_id, scope_values = scope_row(scope_logs.scope, scope_logs.schema_url)
        kept = 0
        for index, record in enumerate(scope_logs.log_records):
            try:
                _record_from_message(record, batch, resource_id, scope_id, resource_values[1],
                                     latest_ns)
                kept += 1
            except BadLogRecord as error:
                refuse_log(batch, "bad_log_record", f"log record refused: {error}",
                           locate(where, f"scope {scope_index}", f"log record {index}"))
        if kept:
            batch.scopes[scope_id] = scope_values
            used = True
    if used:
        batch.resources[resource_id] = resource_values


def flatten_logs_request(
    request: ExportLogsServiceRequest, *, where: str = "",
    max_future_ns: int = DEFAULT_MAX_FUTURE_NS, into: FlatBatch | None = None,
) -> FlatBatch:
    """The log records of a decoded request as rows (appended to `into` when given)."""
    batch = into if into is not None else FlatBatch()
    latest = latest_acceptable_start_ns(max_future_ns)
    for index, resource_logs in enumerate(request.resource_logs):
        flatten_resource_logs(resource_logs, batch, where=locate(where, f"resource {index}"),
                              latest_ns=latest)
    return batch

