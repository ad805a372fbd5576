"""Binary OTLP logs (ExportLogsServiceRequest) → protobuf objects, salvaging what parses.

As for traces (ingest/decode/proto_decode.py): one C-level parse of the whole message first; when
that
fails, the wire format is walked resource by resource, then record by record, so that one bad
record (invalid UTF-8, a corrupt field) is refused alone while its neighbours are kept. Files
are read one ResourceLogs at a time, so memory follows the largest resource, not the file.

`looks_like_logs` tells an ExportLogsServiceRequest from an ExportTraceServiceRequest: both
put their resources in field 1 and their scopes in field 2, but a LogRecord's fields have other
wire types than a Span's of the same number (field 1 is a fixed64 time, not the bytes of a
trace id; field 2 a varint severity, not the bytes of a span id; ...).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import ScopeLogs

from ingest.decode.flatten import locate
from ingest.decode.proto_decode import UndecodableMessage
from ingest.decode.protowire import (
    FIXED32,
    FIXED64,
    LENGTH_DELIMITED,
    VARINT,
    WireError,
    iter_fields,
    iter_stream_fields,
    read_exactly,
    read_varint,
)
from store import Rejection

# Field numbers from opentelemetry/proto/logs/v1/logs.proto and logs_service.proto.
REQUEST_RESOURCE_LOGS = 1
RESOURCE_LOGS_RESOURCE, RESOURCE_LOGS_SCOPE_LOGS, RESOURCE_LOGS_SCHEMA_URL = 1, 2, 3
SCOPE_LOGS_SCOPE, SCOPE_LOGS_LOG_RECORDS, SCOPE_LOGS_SCHEMA_URL = 1, 2, 3
# A ResourceLogs larger than this in a file is refused rather than held in memory.
MAX_RESOURCE_BYTES = 512 * 1024 * 1024
CHUNK_RECORDS = 8192

# (field, wire type) pairs that only a LogRecord has, and those that only a Span has.
_LOG_ONLY = {(1, FIXED64), (2, VARINT), (6, LENGTH_DELIMITED), (7, VARINT), (8, FIXED32),
             (10, LENGTH_DELIMITED), (11, FIXED64), (12, LENGTH_DELIMITED)}
_SPAN_ONLY = {(1, LENGTH_DELIMITED), (2, LENGTH_DELIMITED), (4, LENGTH_DELIMITED),
              (6, VARINT), (7, FIXED64), (8, FIXED64), (10, VARINT), (11, LENGTH_DELIMITED),
              (12, VARINT)}


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(field, wire type, value bytes) of a possibly truncated message (a peeked file head):
    stops quietly where the bytes stop making sense. Values are cut at the end of `data`."""
    pos = 0
    view = memoryview(data)
    try:
        while pos < len(data):
            tag, pos = read_varint(view, pos)
            field, wire_type = tag >> 3, tag & 7
            if field == 0:
                return
            if wire_type == VARINT:
                _, end = read_varint(view, pos)
            elif wire_type == FIXED64:
                end = pos + 8
            elif wire_type == FIXED32:
                end = pos + 4
            elif wire_type == LENGTH_DELIMITED:
                length, pos = read_varint(view, pos)
                end = pos + length
            else:
                return
            yield field, wire_type, data[pos:end]
            pos = end
    except WireError:
        return


def looks_like_logs(data: bytes) -> bool:
    """True when the first record this (head of a) request holds reads as a LogRecord."""
    return export_kind(data) == "logs"


def export_kind(data: bytes) -> str | None:
    """"logs" or "traces", by the first record in this (head of a) request; None when no
    record tells (an empty request, or bytes that are neither)."""
    for field, wire_type, resource in _fields(data):
        if field != 1 or wire_type != LENGTH_DELIMITED:
            continue
        for field2, wire_type2, scope in _fields(resource):
            if field2 != 2 or wire_type2 != LENGTH_DELIMITED:
                continue
            for field3, wire_type3, item in _fields(scope):
                if field3 != 2 or wire_type3 != LENGTH_DELIMITED:
                    continue
                for pair in ((f, w) for f, w, _ in _fields(item)):
                    if pair in _LOG_ONLY:
                        return "logs"
                    if pair in _SPAN_ONLY:
                        return "traces"
    return None


def _undecodable(what: str, where: str, error: Exception) -> Rejection:
    return Rejection("undecodable_protobuf", f"{what} could not be decoded ({error})", where,
                     spans=0)


def _salvage_scope_logs(data: bytes, offset: int, into: ScopeLogs, where: str,
                        rejections: list[Rejection]) -> None:
    for field, wire_type, start, end in iter_fields(data, offset):
        if wire_type != LENGTH_DELIMITED:
            continue
        chunk = data[start - offset:end - offset]
        if field == SCOPE_LOGS_LOG_RECORDS:
            try:
                into.log_records.add().MergeFromString(chunk)
            except DecodeError as error:
                del into.log_records[-1]
                rejections.append(Rejection(
                    "undecodable_log_record",
                    f"log record could not be decoded ({error}; often invalid UTF-8)",
                    locate(where, f"byte offset {start}"), spans=0, log_records=1))
        elif field == SCOPE_LOGS_SCOPE:
            try:
                into.scope.MergeFromString(chunk)
            except DecodeError as error:
                into.scope.Clear()
                rejections.append(_undecodable("instrumentation scope",
                                               locate(where, f"byte offset {start}"), error))
        elif field == SCOPE_LOGS_SCHEMA_URL:
            into.schema_url = chunk.decode("utf-8", "replace")


def add_resource_logs(request: ExportLogsServiceRequest, chunk: bytes, offset: int, where: str,
                      rejections: list[Rejection]) -> None:
    """Parse one serialized ResourceLogs into `request`, salvaging what parses."""
    resource_logs = request.resource_logs.add()
    try:
        resource_logs.MergeFromString(chunk)
        return
    except DecodeError:
        resource_logs.Clear()
    try:
        for field, wire_type, start, end in iter_fields(chunk, offset):
            if wire_type != LENGTH_DELIMITED:
                continue
            part = chunk[start - offset:end - offset]
            if field == RESOURCE_LOGS_SCOPE_LOGS:
                scope_logs = resource_logs.scope_logs.add()
                try:
                    scope_logs.MergeFromString(part)
                except DecodeError:
                    scope_logs.Clear()
                    _salvage_scope_logs(part, start, scope_logs, where, rejections)
            elif field == RESOURCE_LOGS_RESOURCE:
                try:
                    resource_logs.resource.MergeFromString(part)
                except DecodeError as error:
                    resource_logs.resource.Clear()
                    rejections.append(_undecodable(
                        "resource", locate(where, f"byte offset {start}"), error))
            elif field == RESOURCE_LOGS_SCHEMA_URL:
                resource_logs.schema_url = part.decode("utf-8", "replace")
    except WireError as error:
        rejections.append(_undecodable("the rest of this resource", where, error))


def decode_logs_request(body: bytes, where: str = "", base_offset: int = 0
                        ) -> tuple[ExportLogsServiceRequest, list[Rejection]]:
    """Decode one message; raises UndecodableMessage when its top level is not protobuf."""
    request = ExportLogsServiceRequest()
    try:
        request.MergeFromString(body)
        return request, []
    except DecodeError:
        request.Clear()
    rejections: list[Rejection] = []
    try:
        for field, wire_type, start, end in iter_fields(body, base_offset):
            if field == REQUEST_RESOURCE_LOGS and wire_type == LENGTH_DELIMITED:
                add_resource_logs(request, body[start - base_offset:end - base_offset], start,
                                  locate(where, f"byte offset {start}"), rejections)
    except WireError as error:
        if not request.resource_logs:
            raise UndecodableMessage(
                f"not a protobuf ExportLogsServiceRequest: {error}") from None
        rejections.append(_undecodable("the rest of the message", where, error))
    return request, rejections


def iter_streamed_logs_request(stream: BinaryIO, where: str
                               ) -> Iterator[tuple[ExportLogsServiceRequest, list[Rejection]]]:
    """One ExportLogsServiceRequest read from a stream a ResourceLogs at a time, yielded in
    requests of about CHUNK_RECORDS records. Raises WireError where the stream is not protobuf
    (after yielding what came before)."""
    request, rejections, records = ExportLogsServiceRequest(), [], 0
    for field, wire_type, offset, length in iter_stream_fields(stream, None, 0):
        if wire_type != LENGTH_DELIMITED:
            continue
        if length > MAX_RESOURCE_BYTES:
            raise WireError(f"a ResourceLogs of {length} bytes (more than "
                            f"{MAX_RESOURCE_BYTES}) is not read", offset)
        chunk = read_exactly(stream, length, offset)
        if field != REQUEST_RESOURCE_LOGS:
            continue
        add_resource_logs(request, chunk, offset, locate(where, f"byte offset {offset}"),
                          rejections)
        records += sum(len(s.log_records) for s in request.resource_logs[-1].scope_logs)
        if records >= CHUNK_RECORDS:
            yield request, rejections
            request, rejections, records = ExportLogsServiceRequest(), [], 0
    if request.resource_logs or rejections:
        yield request, rejections
