"""Size and time limits on request bodies, so that no request can exhaust memory or a thread.

The body limit counts bytes after decompression (an OTLP exporter's 64 MiB of spans is 64 MiB
to decode whatever the wire size), and gzip is inflated incrementally with `max_length` so that
a small "gzip bomb" is stopped at the limit instead of being expanded in memory first.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
# Concatenated gzip members in one request body: exporters send one; `cat a.gz b.gz` makes a
# few. Each member costs a new inflater, so their number is bounded (see GzipMembers).
MAX_GZIP_MEMBERS = 64
_SLICE = 16 * 1024  # input fed to zlib at a time


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
    # `serve` lowers it to this port's share of the process's descriptors
    # (budgetscope/server/descriptors.py).
    max_connections: int = 1024
    # Open gRPC connections (grpc.max_allowed_incoming_connections: past it grpc closes new
    # ones at once; it has no idle one make room), lowered by `serve` to the port's share.
    max_grpc_connections: int = 1024
    # Seconds a gRPC connection has to finish its HTTP/2 handshake (the client's preface and
    # SETTINGS; grpc.server_handshake_timeout_ms): one that sends nothing, or half of it, is
    # closed then. Exporters send it at once.
    handshake_timeout: float = 5.0
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


def gunzip_limited(data: bytes, limit: int, max_members: int = MAX_GZIP_MEMBERS) -> bytes:
    """Inflate a gzip body, refusing it once the output passes `limit` bytes.

    `max_length` makes zlib stop producing output at the limit, so a bomb costs at most `limit`
    bytes of memory, never its full size. Concatenated members (valid gzip) are inflated in
    turn, at most `max_members` of them: each new member costs a fresh inflater, so without a
    bound a body of 18-byte empty members costs far more per byte than any other.
    """
    members = GzipMembers(limit, max_members)
    members.feed(data)
    return members.finish()


class GzipMembers:
    """Incremental inflation of concatenated gzip members, linear in the input.

    The input is fed to zlib in slices of at most `_SLICE` bytes through a memoryview, so the
    copy zlib makes of what follows a member's end (`unused_data`) is at most one slice: the
    hand-written loop this replaces copied the whole rest of the body at every member and
    concatenated the output member by member, quadratic in the number of members (4,000 small
    members in 152 KB took 15-19 s of CPU).
    """

    def __init__(self, limit: int, max_members: int | None = MAX_GZIP_MEMBERS) -> None:
        self.limit = limit
        self.max_members = max_members
        self.members = 0
        self._out: list[bytes] = []
        self._size = 0
        self._inflater: Any = None  # the current member's; None between members

    def feed(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        position = 0
        try:
            while position < len(view):
                if self._inflater is None:
                    if self.members and view[position] == 0:
                        # Zero padding after a member, as some tools write it.
                        zeros = view[position:position + _SLICE].tobytes()
                        position += len(zeros) - len(zeros.lstrip(b"\x00"))
                        continue
                    self.members += 1
                    if self.max_members is not None and self.members > self.max_members:
                        raise BadBody(f"gzip body has more than {self.max_members} gzip members "
                                      "(concatenated gzip streams)")
                    self._inflater = zlib.decompressobj(wbits=31)
                piece = view[position:position + _SLICE]
                position += len(piece)
                self._inflate(piece)
                if self._inflater is not None and self._inflater.eof:
                    position -= len(self._inflater.unused_data)
                    self._inflater = None
        except zlib.error as error:
            raise BadBody(f"body is not valid gzip ({error})") from None

    def _inflate(self, piece: memoryview) -> None:
        inflater = self._inflater
        room = self.limit + 1 - self._size
        produced = inflater.decompress(piece, room)
        while True:
            self._size += len(produced)
            if self._size > self.limit:
                raise BodyTooLarge(self.limit)
            if produced:
                self._out.append(produced)
            if not inflater.unconsumed_tail:
                return
            # Output stopped at the limit with input left: one more byte refuses it.
            room = self.limit + 1 - self._size
            produced = inflater.decompress(inflater.unconsumed_tail, room)

    def finish(self) -> bytes:
        if self._inflater is not None or not self.members:
            raise BadBody("gzip body is truncated")
        return b"".join(self._out)
