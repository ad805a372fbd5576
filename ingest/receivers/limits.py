"""Size and time limits on request bodies, so that no request can exhaust memory or a thread.

The body limit counts bytes after decompression (an OTLP exporter's 64 MiB of spans is 64 MiB
to decode whatever the wire size), and gzip is inflated incrementally with `max_length` so that
a small "gzip bomb" is stopped at the limit instead of being expanded in memory first.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import BinaryIO

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
_READ_CHUNK = 256 * 1024


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # Seconds a connection may sit idle, or a single socket read may wait.
    socket_timeout: float = 30.0
    # Seconds a whole body may take to arrive: a client trickling one byte per socket timeout
    # ("slowloris") would otherwise hold a thread forever.
    body_timeout: float = 60.0
    # Concurrent HTTP connections; more are answered 503 at once rather than queued.
    max_connections: int = 64
    # Seconds a request waits for its spans to be committed before it is answered 503.
    commit_timeout: float = 30.0


class BodyTooLarge(ValueError):
    """The body (after decompression) exceeds the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body exceeds the {limit:,}-byte limit "
                         "(counted after decompression)")
        self.limit = limit


class BadBody(ValueError):
    """The body could not be read or decompressed."""


class BodyTimeout(BadBody):
    """The client took longer than the body timeout to send its body."""


def read_exactly(stream: BinaryIO, length: int, deadline: float) -> bytes:
    """`length` bytes from a socket file, in chunks, giving up at `deadline` (monotonic)."""
    parts: list[bytes] = []
    remaining = length
    while remaining > 0:
        if time.monotonic() > deadline:
            raise BodyTimeout("request body took too long to arrive")
        chunk = stream.read(min(remaining, _READ_CHUNK))
        if not chunk:
            raise BadBody(f"connection closed after {length - remaining} of {length} body bytes")
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def read_chunked(stream: BinaryIO, limit: int, deadline: float) -> bytes:
    """An HTTP/1.1 chunked body, refused as soon as it grows past `limit` bytes."""
    parts: list[bytes] = []
    total = 0
    while True:
        line = stream.readline(1024)
        if not line.endswith(b"\n"):
            raise BadBody("malformed chunked encoding")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise BadBody("malformed chunk size") from None
        if size == 0:
            while stream.readline(1024) not in (b"\r\n", b"\n", b""):
                pass  # trailers, ignored
            return b"".join(parts)
        total += size
        if total > limit:
            raise BodyTooLarge(limit)
        parts.append(read_exactly(stream, size, deadline))
        stream.readline(1024)  # the CRLF after the chunk


def gunzip_limited(data: bytes, limit: int) -> bytes:
    """Inflate a gzip body, refusing it once the output passes `limit` bytes.

    `max_length` makes zlib stop producing output at the limit; the unconsumed input stays in
    `unconsumed_tail`, so a bomb costs at most `limit` bytes of memory, never its full size.
    """
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data, limit + 1)
        if len(out) > limit or (inflater.unconsumed_tail and not inflater.eof):
            raise BodyTooLarge(limit)
        if not inflater.eof:
            raise BadBody("gzip body is truncated")
        # Concatenated gzip members are valid gzip; inflate the next ones under the same limit.
        while inflater.unused_data:
            rest = inflater.unused_data
            inflater = zlib.decompressobj(wbits=31)
            more = inflater.decompress(rest, limit + 1 - len(out))
            out += more
            if len(out) > limit or (inflater.unconsumed_tail and not inflater.eof):
                raise BodyTooLarge(limit)
            if not inflater.eof:
                raise BadBody("gzip body is truncated")
    except zlib.error as error:
        raise BadBody(f"body is not valid gzip ({error})") from None
    return out
