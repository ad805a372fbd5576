"""Binary OTLP (ExportTraceServiceRequest) → protobuf objects, salvaging what can be salvaged.

The fast path is one C-level parse of the whole message. Only when that fails do we walk the wire
format and parse resource by resource, then span by span, so that a single bad span (invalid UTF-8,
a corrupt field) is refused alone with its byte offset while its neighbours are kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

from ingest.decode.deep_values import repair_resource, repair_span
from ingest.decode.flatten import locate
from ingest.decode.protowire import (
    LENGTH_DELIMITED,
    WireError,
    iter_fields,
    iter_stream_fields,
    read_exactly,
    skip_exactly,
)
from store import Rejection

# Field numbers from opentelemetry/proto/trace/v1/trace.proto and trace_service.proto.
REQUEST_RESOURCE_SPANS = 1
RESOURCE_SPANS_RESOURCE, RESOURCE_SPANS_SCOPE_SPANS, RESOURCE_SPANS_SCHEMA_URL = 1, 2, 3
SCOPE_SPANS_SCOPE, SCOPE_SPANS_SPANS, SCOPE_SPANS_SCHEMA_URL = 1, 2, 3

# Pieces of a streamed file up to this size are read whole; larger ones are walked field by field.
READ_WHOLE_LIMIT = 16 * 1024 * 1024


class UndecodableMessage(ValueError):
    """Nothing usable: the bytes are not an ExportTraceServiceRequest at all."""


def _undecodable(what: str, where: str, error: Exception) -> Rejection:
    return Rejection("undecodable_protobuf", f"{what} could not be decoded ({error})", where, 0)


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def _salvage_scope_spans(
    data: bytes, offset: int, into: ScopeSpans, where: str, rejections: list[Rejection]
) -> None:
    for field, wire_type, start, end in iter_fields(data, offset):
        chunk = data[start - offset:end - offset]
        if wire_type != LENGTH_DELIMITED:
            continue
        if field == SCOPE_SPANS_SPANS:
            try:
                into.spans.add().MergeFromString(chunk)
            except DecodeError as error:
                del into.spans[-1]
                repaired = repair_span(chunk)  # nested too deep for the runtime: cut at ours
                if repaired is not None:
                    into.spans.append(repaired)
                    continue
                rejections.append(Rejection(
                    "undecodable_span", f"span could not be decoded ({error}; often invalid UTF-8)",
                    locate(where, f"byte offset {start}")))
        elif field == SCOPE_SPANS_SCOPE:
            try:
                into.scope.MergeFromString(chunk)
            except DecodeError as error:
                into.scope.Clear()
                rejections.append(_undecodable("instrumentation scope", locate(
                    where, f"byte offset {start}"), error))
        elif field == SCOPE_SPANS_SCHEMA_URL:
            into.schema_url = _text(chunk)


def _resource_into(resource: Resource, chunk: bytes, where: str,
                   rejections: list[Rejection]) -> None:
    """Parse a resource; one with invalid UTF-8 is kept with the bad text replaced (its spans
    keep their service.name), and said; one that is not a Resource at all is left empty."""
    try:
        resource.MergeFromString(chunk)
        return
    except DecodeError as error:
        resource.Clear()
        problem = error
    repaired = repair_resource(chunk)
    if repaired is None:
        rejections.append(_undecodable("resource", where, problem))
        return
    resource.CopyFrom(repaired[0])
    rejections.append(Rejection(
        "resource_text_replaced", f"{repaired[1]} resource attribute(s) held invalid UTF-8: "
        "kept with each bad sequence replaced by U+FFFD", where, 0))


def _salvage_resource_spans(
    data: bytes, offset: int, into: ResourceSpans, where: str, rejections: list[Rejection]
) -> None:
    for field, wire_type, start, end in iter_fields(data, offset):
        chunk = data[start - offset:end - offset]
        if wire_type != LENGTH_DELIMITED:
            continue
        if field == RESOURCE_SPANS_SCOPE_SPANS:
            scope_spans = into.scope_spans.add()
            try:
                scope_spans.MergeFromString(chunk)
            except DecodeError:
                scope_spans.Clear()
                _salvage_scope_spans(chunk, start, scope_spans, where, rejections)
        elif field == RESOURCE_SPANS_RESOURCE:
            _resource_into(into.resource, chunk, locate(where, f"byte offset {start}"),
                           rejections)
        elif field == RESOURCE_SPANS_SCHEMA_URL:
            into.schema_url = _text(chunk)


def add_resource_spans(
    request: ExportTraceServiceRequest, chunk: bytes, offset: int, where: str,
    rejections: list[Rejection],
) -> None:
    """Parse one serialized ResourceSpans into `request`, salvaging what parses."""
    resource_spans = request.resource_spans.add()
    try:
        resource_spans.MergeFromString(chunk)
    except DecodeError:
        resource_spans.Clear()
        try:
            _salvage_resource_spans(chunk, offset, resource_spans, where, rejections)
        except WireError as error:
            rejections.append(_undecodable("the rest of this resource", where, error))


def decode_request(
    body: bytes, where: str = "", base_offset: int = 0
) -> tuple[ExportTraceServiceRequest, list[Rejection]]:
    """Decode one message; raises UndecodableMessage when its top level is not protobuf."""
    request = ExportTraceServiceRequest()
    try:
        request.MergeFromString(body)
        return request, []
    except DecodeError:
        request.Clear()
    rejections: list[Rejection] = []
    try:
        for field, wire_type, start, end in iter_fields(body, base_offset):
            if field == REQUEST_RESOURCE_SPANS and wire_type == LENGTH_DELIMITED:
                chunk = body[start - base_offset:end - base_offset]
                add_resource_spans(request, chunk, start, where, rejections)
    except WireError as error:
        if not request.resource_spans:
            raise UndecodableMessage(f"not a protobuf ExportTraceServiceRequest: {error}") from None
        rejections.append(_undecodable("the rest of the message", where, error))
    return request, rejections


class _StreamedRequests:
    """Walks one (possibly huge) ExportTraceServiceRequest on a stream, yielding requests of
    about `chunk_spans` spans so that memory stays flat whatever the file size."""

    def __init__(self, stream: BinaryIO, where: str, chunk_spans: int,
                 read_whole_limit: int) -> None:
        self.stream = stream
        self.read_whole_limit = read_whole_limit
        self.where = where
        self.chunk_spans = chunk_spans
        self.request = ExportTraceServiceRequest()
        self.rejections: list[Rejection] = []
        self.spans = 0

    def _take(self) -> tuple[ExportTraceServiceRequest, list[Rejection]]:
        taken = (self.request, self.rejections)
        self.request, self.rejections, self.spans = ExportTraceServiceRequest(), [], 0
        return taken

    def _read(self, length: int, offset: int) -> bytes:
        return read_exactly(self.stream, length, offset)

    def _here(self, offset: int) -> str:
        return locate(self.where, f"byte offset {offset}")

    def run(self) -> Iterator[tuple[ExportTraceServiceRequest, list[Rejection]]]:
        for field, wire_type, offset, length in iter_stream_fields(self.stream, None, 0):
            if wire_type != LENGTH_DELIMITED:
                continue
            if field != REQUEST_RESOURCE_SPANS:
                skip_exactly(self.stream, length, offset)
            elif length <= self.read_whole_limit:
                chunk = self._read(length, offset)
                add_resource_spans(self.request, chunk, offset, self._here(offset),
                                   self.rejections)
                self.spans += sum(len(s.spans) for s in self.request.resource_spans[-1].scope_spans)
            else:
                yield from self._walk_resource_spans(offset, length)
            if self.spans >= self.chunk_spans:
                yield self._take()
        if self.request.resource_spans or self.rejections:
            yield self._take()

    def _walk_resource_spans(
        self, offset: int, length: int
    ) -> Iterator[tuple[ExportTraceServiceRequest, list[Rejection]]]:
        header = ResourceSpans()  # resource and schema_url, copied into every piece
        for field, wire_type, at, size in iter_stream_fields(self.stream, length, offset):
            if wire_type != LENGTH_DELIMITED:
                continue
            if field == RESOURCE_SPANS_SCOPE_SPANS:
                yield from self._walk_scope_spans(header, at, size)
                continue
            chunk = self._read(size, at)
            if field == RESOURCE_SPANS_RESOURCE:
                _resource_into(header.resource, chunk, self._here(at), self.rejections)
            elif field == RESOURCE_SPANS_SCHEMA_URL:
                header.schema_url = _text(chunk)

    def _walk_scope_spans(
        self, header: ResourceSpans, offset: int, length: int
    ) -> Iterator[tuple[ExportTraceServiceRequest, list[Rejection]]]:
        scope_header = ScopeSpans()
        target: ScopeSpans | None = None
        for field, wire_type, at, size in iter_stream_fields(self.stream, length, offset):
            if wire_type != LENGTH_DELIMITED:
                continue
            chunk = self._read(size, at)
            if field == SCOPE_SPANS_SCOPE:
                try:
                    scope_header.scope.MergeFromString(chunk)
                except DecodeError as error:
                    self.rejections.append(_undecodable("scope", self._here(at), error))
            elif field == SCOPE_SPANS_SCHEMA_URL:
                scope_header.schema_url = _text(chunk)
            elif field == SCOPE_SPANS_SPANS:
                if target is None:
                    resource_spans = self.request.resource_spans.add()
                    resource_spans.CopyFrom(header)
                    target = resource_spans.scope_spans.add()
                    target.CopyFrom(scope_header)
                try:
                    target.spans.add().MergeFromString(chunk)
                    self.spans += 1
                except DecodeError as error:
                    del target.spans[-1]
                    repaired = repair_span(chunk)
                    if repaired is not None:
                        target.spans.append(repaired)
                        self.spans += 1
                    else:
                        self.rejections.append(Rejection(
                            "undecodable_span", f"span could not be decoded ({error})",
                            self._here(at)))
                if self.spans >= self.chunk_spans:
                    yield self._take()
                    target = None


def iter_streamed_request(
    stream: BinaryIO, where: str, chunk_spans: int = 8192,
    read_whole_limit: int = READ_WHOLE_LIMIT,
) -> Iterator[tuple[ExportTraceServiceRequest, list[Rejection]]]:
    """One ExportTraceServiceRequest read from a stream in pieces of about chunk_spans spans;
    a ResourceSpans larger than read_whole_limit is walked span by span."""
    return _StreamedRequests(stream, where, chunk_spans, read_whole_limit).run()
