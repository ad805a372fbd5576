"""What keeps idle, slow or surplus clients of the OTLP/HTTP port from hurting the others.

- ConnectionTable: open connections, and which of them wait for a request head (idle keep-alive
  or not started). At the cap, the one waiting longest makes room (if it waited long enough to
  count as idle), so idle sockets can never lock well-behaved clients out; only when every
  connection is busy with a request is a new one refused.
- answer_and_linger: send a final answer, then drop what the client still sends, for a bounded
  time and size, before closing. HTTP/1.1 clients (http.client, requests) send their whole body
  before reading the answer; closing a socket with unread data makes the kernel reset the
  connection, and the client reports "broken pipe" or "connection reset" instead of our
  401/413/503 (97 of 500 simultaneous clients did, on the stdlib receiver).
- ReceivingBytes: the bytes of bodies still arriving, all connections together, bounded.

All of it runs on the receiver's event-loop thread: no locks.
"""

from __future__ import annotations

import contextlib
import socket
import time

from tornado import gen
from tornado.iostream import IOStream, StreamClosedError

# A connection waiting this long for a request head counts as idle (and may make room at the
# cap); a client that has just connected sends its request within milliseconds.
IDLE_AFTER_SECONDS = 1.0
# How long and how much a refused client may keep sending before it is closed on.
LINGER_SECONDS = 2.0
LINGER_BYTES = 8 * 1024 * 1024
# Refused connections lingering at once; past this they are closed once the answer is written.
MAX_LINGERING = 256
REFUSED_CONNECTION = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
                      b"Content-Length: 0\r\nConnection: close\r\n\r\n")


class ConnectionTable:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._waiting: dict[IOStream, float] = {}  # stream → waiting for a head since
        self._busy: set[IOStream] = set()  # a request is being read, decoded or answered

    def __len__(self) -> int:
        return len(self._waiting) + len(self._busy)

    @property
    def busy(self) -> int:
        return len(self._busy)

    def make_room(self) -> bool:
        """True when a new connection may be served, closing the longest idle one if needed."""
        if len(self) < self.cap:
            return True
        if self._waiting:
            stream, since = min(self._waiting.items(), key=lambda item: item[1])
            if time.monotonic() - since >= IDLE_AFTER_SECONDS:
                self.closed(stream)
                stream.close()
                return True
        return False

    def waiting(self, stream: IOStream) -> None:
        self._busy.discard(stream)
        self._waiting.setdefault(stream, time.monotonic())

    def started(self, stream: IOStream) -> None:
        self._waiting.pop(stream, None)
        self._busy.add(stream)

    def closed(self, stream: IOStream) -> None:
        self._waiting.pop(stream, None)
        self._busy.discard(stream)

    def close_idle(self) -> None:
        for stream in list(self._waiting):
            self.closed(stream)
            stream.close()

    def close_all(self) -> None:
        self.close_idle()
        for stream in list(self._busy):
            self.closed(stream)
            stream.close()


class ReceivingBytes:
    """Bytes of request bodies held while they arrive, against one budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.held = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.budget:
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        self.held -= size


class Lingering:
    """Answers with the connection closed after it, draining the client first (see above)."""

    def __init__(self) -> None:
        self.count = 0

    async def answer_and_linger(self, stream: IOStream, answer: bytes) -> None:
        if self.count >= MAX_LINGERING:
            with contextlib.suppress(StreamClosedError):
                await stream.write(answer)
            stream.close()
            return
        self.count += 1
        try:
            await stream.write(answer)
            with contextlib.suppress(OSError):
                stream.socket.shutdown(socket.SHUT_WR)  # the answer is complete: send FIN
            deadline = time.monotonic() + LINGER_SECONDS
            dropped = 0
            while dropped < LINGER_BYTES:
                read = stream.read_bytes(256 * 1024, partial=True)
                dropped += len(await gen.with_timeout(
                    deadline - time.monotonic() + stream.io_loop.time(), read,
                    quiet_exceptions=(StreamClosedError,)))
        except (StreamClosedError, TimeoutError, OSError):
            pass  # the client read the answer and closed, or took too long
        finally:
            self.count -= 1
            stream.close()
