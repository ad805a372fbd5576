"""Trace files → a stream of decoded requests, whatever form the file takes.

Forms, each optionally gzip-compressed (detected by magic bytes, not by file name):
- OTLP JSON lines, as the Collector's file exporter writes them (one request per line);
- one OTLP JSON document (a request, or a list of requests), possibly pretty-printed;
- one binary ExportTraceServiceRequest, read piece by piece so memory stays flat;
- the Collector's length-prefixed protobuf stream (4-byte big-endian size, then a request).
Each request may be a logs export instead (resourceLogs, ExportLogsServiceRequest), told apart
by content too (a JSON line at a time, a message at a time: ingest/decode/log_decode.py), so that a
Collector file exporter shared by the traces and logs pipelines is read whole.
"""

from __future__ import annotations

import io
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.decode.log_decode import (
    decode_logs_request,
    iter_streamed_logs_request,
    looks_like_logs,
)
from ingest.decode.log_flatten import flatten_logs_request
from ingest.decode.log_json import flatten_json_logs, is_logs_document
from ingest.decode.otlp_json import NotOtlpJson, check_request_shape, flatten_json_request
from ingest.decode.proto_decode import UndecodableMessage, decode_request, iter_streamed_request
from ingest.decode.proto_flatten import flatten_parsed
from ingest.decode.protowire import WireError
from store import FlatBatch, Rejection

GZIP_MAGIC = b"\x1f\x8b"
# A single JSON line or document larger than this is refused rather than held in memory.
MAX_JSON_DOCUMENT = 512 * 1024 * 1024
MAX_PREFIXED_MESSAGE = 512 * 1024 * 1024
MAX_EMPTY_MESSAGES = 1024


@dataclass
class Piece:
    """A decoded request from a file, with where it came from and what was refused in it:
    a protobuf message, or an OTLP JSON document (flattened straight from its dicts)."""

    request: ExportTraceServiceRequest | None
    where: str
    rejections: list[Rejection] = field(default_factory=list)
    document: Any = None
    check_text: bool = False  # the JSON may hold invalid UTF-8: check each span's text
    logs: ExportLogsServiceRequest | None = None  # a logs export instead of a trace export

    def flatten(self, *, max_future_ns: int, into: FlatBatch) -> None:
        """Append this piece's spans or log records (and their refusals) to `into`."""
        if self.logs is not None:
            flatten_logs_request(self.logs, where=self.where, max_future_ns=max_future_ns,
                                 into=into)
        elif self.document is not None and is_logs_document(self.document):
            flatten_json_logs(self.document, where=self.where, check_text=self.check_text,
                              max_future_ns=max_future_ns, into=into)
        elif self.document is not None:
            flatten_json_request(self.document, where=self.where, check_text=self.check_text,
                                 max_future_ns=max_future_ns, into=into)
        elif self.request is not None and self.request.resource_spans:
            # the receivers' fast path (ingest/decode/proto_flatten.py): same rows, a third of the
            # CPU
            flatten_parsed(self.request, where=self.where, max_future_ns=max_future_ns,
                           into=into)


class CountingReader(io.RawIOBase):
    """Counts the compressed bytes consumed, for progress and for error offsets."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.raw.read(len(buffer))
        buffer[: len(data)] = data
        self.consumed += len(data)
        return len(data)


class GunzipReader(io.RawIOBase):
    """gzip decompression that ends cleanly where the data ends.

    `gzip.GzipFile` raises EOFError on a truncated file from inside a buffered read, losing the
    lines already decompressed in that read; here a truncated or corrupt stream reads as an
    ordinary end of file and says what happened in `problem`, so everything before it is kept.
    Concatenated gzip members (valid gzip) are read in turn; output is produced in bounded
    pieces, so a gzip bomb never inflates all at once."""

    INPUT_CHUNK = 1 << 16

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.inflater = zlib.decompressobj(wbits=31)
        self.pending = b""
        self.done = False
        self.problem: str | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self.pending and not self.done:
            self._inflate(len(buffer))
        count = min(len(buffer), len(self.pending))
        buffer[:count] = self.pending[:count]
        self.pending = self.pending[count:]
        return count

    def _inflate(self, want: int) -> None:
        inflater = self.inflater
        try:
            if inflater.unconsumed_tail:
                self.pending = inflater.decompress(inflater.unconsumed_tail, want)
            elif inflater.eof:
                rest = inflater.unused_data or self.raw.read(self.INPUT_CHUNK)
                if not rest.strip(b"\x00"):  # end of file, or the zero padding some tools add
                    self.done = True
                    return
                self.inflater = zlib.decompressobj(wbits=31)
                self.pending = self.inflater.decompress(rest, want)
            else:
                chunk = self.raw.read(self.INPUT_CHUNK)
                if not chunk:
                    self.problem = "gzip data is truncated (the stream ends before its end marker)"
                    self.done = True
                    return
                self.pending = inflater.decompress(chunk, want)
        except zlib.error as error:
            self.problem = f"gzip data is corrupt ({error})"
            self.done = True


def expand_paths(paths: list[str | os.PathLike[str]]) -> Iterator[Path]:
    """Files as given, and for folders every file below them (hidden ones aside), in a stable
    order. The form is told by content, not name: the Collector's rotated files carry any name,
    and a file that is no trace data is reported, not silently passed over."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                hidden = any(part.startswith(".") for part in child.relative_to(path).parts)
                if child.is_file() and not hidden:
                    yield child
        else:
            yield path


def _rejection(reason: str, message: str, where: str) -> Rejection:
    return Rejection(reason, message, where, 0)


def _json_pieces(stream: BinaryIO, name: str) -> Iterator[Piece]:
    first = stream.readline(MAX_JSON_DOCUMENT + 1)
    try:
        json.loads(first)
        whole_document = False
    except json.JSONDecodeError as error:
        # Incomplete at the end of the first line: one document spread over many lines.
        whole_document = error.pos >= len(first.rstrip())
    except (UnicodeDecodeError, RecursionError):
        whole_document = False
    if whole_document:
        rest = stream.read(MAX_JSON_DOCUMENT + 1 - len(first))
        yield from _json_document(first + rest, name, line=1)
        return
    line_number = 1
    line = first
    while line:
        if line.strip():
            yield from _json_document(line, name, line=line_number)
        line_number += 1
        line = stream.readline(MAX_JSON_DOCUMENT + 1)


def _json_document(data: bytes, name: str, line: int) -> Iterator[Piece]:
    where = f"{name} line {line}"
    if len(data) > MAX_JSON_DOCUMENT:
        yield Piece(ExportTraceServiceRequest(), where, [_rejection(
            "oversize", f"JSON larger than {MAX_JSON_DOCUMENT} bytes refused", where)])
        return
    try:
        text = data.decode("utf-8")
        check_text = "\\ud" in text or "\\uD" in text
    except UnicodeDecodeError:
        # Keep the good spans: undecodable bytes become lone surrogates, and the spans
        # holding them are refused one by one in request_from_json.
        text = data.decode("utf-8", errors="surrogateescape")
        check_text = True
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        at = f"{name} line {line + error.lineno - 1} column {error.colno}"
        yield Piece(ExportTraceServiceRequest(), at, [_rejection(
            "malformed_json", f"malformed JSON: {error.msg}", at)])
        return
    except RecursionError:
        yield Piece(ExportTraceServiceRequest(), where, [_rejection(
            "malformed_json", "JSON nested too deeply", where)])
        return
    documents = document if isinstance(document, list) else [document]
    for index, item in enumerate(documents):
        here = where if len(documents) == 1 else f"{where} request {index}"
        if is_logs_document(item):
            yield Piece(None, here, document=item, check_text=check_text)
            continue
        try:
            check_request_shape(item)
        except NotOtlpJson as error:
            yield Piece(None, here, [_rejection("not_otlp", str(error), here)])
            continue
        yield Piece(None, here, document=item, check_text=check_text)


def _prefixed_pieces(stream: BinaryIO, name: str) -> Iterator[Piece]:
    offset = 0
    empty_run = 0
    while True:
        header = stream.read(4)
        if not header:
            return
        where = f"{name} byte offset {offset}"
        if len(header) < 4:
            yield Piece(ExportTraceServiceRequest(), where, [_rejection(
                "truncated", "length prefix cut short: file truncated", where)])
            return
        size = int.from_bytes(header, "big")
        # Empty messages are valid, but a long run of them is zero bytes, not a stream: a
        # gzip bomb of zeros would otherwise be read 4 bytes at a time (64M pieces per 256 MB).
        empty_run = empty_run + 1 if size == 0 else 0
        if empty_run > MAX_EMPTY_MESSAGES:
            yield Piece(ExportTraceServiceRequest(), where, [_rejection(
                "unknown_format", f"more than {MAX_EMPTY_MESSAGES} empty messages in a row: "
                "zero bytes, not a message stream; the rest of the file was skipped", where)])
            return
        if size > MAX_PREFIXED_MESSAGE:
            yield Piece(ExportTraceServiceRequest(), where, [_rejection(
                "oversize", f"length prefix says {size} bytes: not a message stream, or corrupt",
                where)])
            return
        body = stream.read(size)
        if len(body) < size:
            yield Piece(ExportTraceServiceRequest(), where, [_rejection(
                "truncated", f"message cut short ({len(body)} of {size} bytes): file truncated",
                where)])
            return
        try:
            if looks_like_logs(body):
                logs, rejections = decode_logs_request(body, where, offset + 4)
                yield Piece(None, where, rejections, logs=logs)
            else:
                request, rejections = decode_request(body, where, offset + 4)
                yield Piece(request, where, rejections)
        except UndecodableMessage as error:
            yield Piece(ExportTraceServiceRequest(), where, [_rejection(
                "undecodable_protobuf", str(error), where)])
        offset += 4 + size


def _looks_length_prefixed(head: bytes) -> bool:
    # A bare request starts with field 1's tag (0x0a). A prefixed stream starts with a big-endian
    # size whose first byte is 0 for any message under 16 MiB, followed by that same 0x0a tag.
    if len(head) < 5:
        return len(head) == 4 and head == b"\x00\x00\x00\x00"
    return head[0] != 0x0A and head[4] in (0x0A, 0x00) or head[:4] == b"\x00\x00\x00\x00"


def _binary_pieces(stream: io.BufferedReader, name: str) -> Iterator[Piece]:
    head = stream.peek(5)[:5]
    if _looks_length_prefixed(head):
        yield from _prefixed_pieces(stream, name)
        return
    try:
        if looks_like_logs(stream.peek(1 << 16)):
            for logs, rejections in iter_streamed_logs_request(stream, name):
                yield Piece(None, name, rejections, logs=logs)
            return
        for request, rejections in iter_streamed_request(stream, name):
            yield Piece(request, name, rejections)
    except WireError as error:
        where = f"{name} byte offset {error.offset}"
        yield Piece(ExportTraceServiceRequest(), where, [_rejection(
            "undecodable_protobuf", f"not a protobuf ExportTraceServiceRequest ({error})", where)])


def _pieces(stream: io.BufferedReader, name: str) -> Iterator[Piece]:
    head = stream.peek(64)[:64]
    stripped = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if not head:
        return
    if stripped[:1] in (b"{", b"["):
        yield from _json_pieces(stream, name)
    elif head[:1] == b"\x0a" or _looks_length_prefixed(head[:5]):
        yield from _binary_pieces(stream, name)
    else:
        yield Piece(ExportTraceServiceRequest(), name, [_rejection(
            "unknown_format",
            f"not OTLP JSON, JSON lines or protobuf (starts with {head[:8].hex(' ')})", name)])


@dataclass
class OpenedFile:
    path: Path
    size: int
    counter: CountingReader

    @property
    def consumed(self) -> int:
        return self.counter.consumed


def read_pieces(path: Path, opened: list[OpenedFile] | None = None) -> Iterator[Piece]:
    """Every request in one file. Failures of the file itself (missing, truncated gzip) come
    out as a Piece with a rejection, after whatever was read before them."""
    name = str(path)
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed in finally, after the generator is done
    except OSError as error:
        yield Piece(ExportTraceServiceRequest(), name, [_rejection(
            "unreadable", f"cannot open: {error.strerror or error}", name)])
        return
    try:
        counter = CountingReader(raw)
        size = os.fstat(raw.fileno()).st_size
        if opened is not None:
            opened.append(OpenedFile(path, size, counter))
        buffered = io.BufferedReader(counter, buffer_size=1 << 20)
        stream: io.BufferedReader = buffered
        gunzip: GunzipReader | None = None
        if buffered.peek(2)[:2] == GZIP_MAGIC:
            gunzip = GunzipReader(buffered)
            stream = io.BufferedReader(gunzip, buffer_size=1 << 20)
        try:
            yield from _pieces(stream, name)
        except OSError as error:
            yield Piece(ExportTraceServiceRequest(), name, [_rejection(
                "unreadable", f"read failed: {error}", name)])
        if gunzip is not None and gunzip.problem:
            yield Piece(ExportTraceServiceRequest(), name, [_rejection(
                "truncated", f"{gunzip.problem}; everything before it was kept",
                f"{name} compressed byte offset {counter.consumed}")])
    finally:
        raw.close()
