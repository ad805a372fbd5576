"""Size and time limits on request bodies, so that no request can exhaust memory or a thread.

The body limit counts bytes after decompression (an OTLP exporter's 64 MiB of spans is 64 MiB
to decode whatever the wire size), and gzip is inflated incrementally with `max_length` so that
a small "gzip bomb" is stopped at the limit instead of being expanded in memory first.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # Seconds an HTTP connection may wait for the whole head of its next request (idle
    # keep-alive time included): a client sending its head a byte at a time is cut off then.
    socket_timeout: float = 30.0
    # Seconds a whole body may take to arrive once the head is in ("slowloris" bodies).
    body_timeout: float = 60.0
    # Open HTTP connections. An idle one costs a socket and no thread; at the cap the one idle
    # for longest makes room, and only when none is idle are new connections answered 503.
    max_connections: int = 1024
    # Requests being decoded or waiting for their commit, per receiver; more are answered
    # 503 / UNAVAILABLE with Retry-After at once (each holds a thread and its rows).
    max_requests: int = 64
    # Bytes of HTTP bodies still arriving, all connections together; past it a request is
    # answered 503 with Retry-After (a thousand connections each sending most of a 64 MiB
    # body would otherwise hold 64 GB).
    max_receiving_bytes: int = 512 * 1024 * 1024
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
