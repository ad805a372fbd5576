"""The dashboard's listening socket: an accept loop of its own and a guard on every connection.

uvicorn, which `st.App` runs on, closes nothing that has not sent a request (its only timeout
starts after an answer), caps nothing below the descriptor limit (`limit_concurrency` answers
503 once a request arrives, the socket already taken), and the access guard, ASGI middleware,
never sees a connection that sent no request. 1,100 connections that sent nothing held every
descriptor of `serve`'s process: exports and /healthz timed out until they let go. And
Python 3.11's asyncio accept loop, at EMFILE, calls accept() again within the same turn and
schedules one retry per failed call (110,000 tracebacks in 20 s here).

So the dashboard's port is served by:
- `Listener`, the accept loop: when accept() fails (EMFILE above all) it leaves the socket
  alone for BACK_OFF_SECONDS, the clients waiting in the kernel's backlog, and logs one line for
  the pause (the commands pace these lines further: budgetscope/log_format.py);
- `ConnectionTable`, every open connection: one must send a complete request head within
  `head_seconds` of connecting or of the last byte answered to it, else it is closed (408 when
  it had sent part of one); a request whose head is in must be answered within
  `request_seconds`. At `max_connections`, the connection waiting longest for a head (for at
  least IDLE_AFTER_SECONDS) is closed to make room, and when none may be, the new one is
  answered 503 and the port pauses; evictions are paced (EVICTIONS_PER_SECOND) by pausing the
  port, never by refusing a newcomer one of them could make room for. So the port never holds
  more descriptors than its share (budgetscope/server/descriptors.py) nor spins on a flood;
- `_Guarded`, the protocol the event loop drives: it wraps uvicorn's own, sees the bytes both
  ways (a head is complete at its blank line) and hands uvicorn a view of the transport that
  reports its writes, and its switch to the websocket protocol, after which the connection is
  the websocket's (never idle, never timed out here: it has its pings).

`take_over(loop, port, limits)` puts it in place: uvicorn creates its server with
`loop.create_server(factory, sock=…)` once the app's lifespan has started, and for the
dashboard's port that call gets a `Listener` (dashboard/server/ground.py lists the reach).
All of it runs on the event loop's thread: no locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

_LOG = logging.getLogger(__name__)

HEAD_SECONDS = 5.0
REQUEST_SECONDS = 60.0
IDLE_AFTER_SECONDS = 1.0
BACK_OFF_SECONDS = 1.0
# At the cap, a newcomer is let in by closing the connection idle longest (for a second at
# least), and once this many have been closed in a second the port stops accepting until the
# budget is back; when none may be closed, one newcomer is answered 503 and the port stops
# accepting for _FULL_PAUSE, the others waiting in the kernel's backlog. A flood that keeps its
# connections up brings back at once each one closed: taking and refusing newcomers as fast as
# they came turned 1,000 of them into 4,300 accepts a second, a fifth of a core and the GIL
# taken from the receivers (export p50 3.0x, p99 6.7x, bench/bench_idle_dashboard.py); paused,
# about 300 a second, and a browser still gets in within a few seconds. The budget once
# refused the newcomer that found it spent, though idle connections were there to close: one
# accept in twenty while a flood drained, and a /healthz behind the flood answered 503 (CI).
EVICTIONS_PER_SECOND = 200.0
_FULL_PAUSE = 0.1
DEFAULT_MAX_CONNECTIONS = 512
_SWEEP_SECONDS = 0.5
_PER_TURN = 128  # connections taken per turn of the loop
_HEAD_END = b"\r\n\r\n"
_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
            b"Connection: close\r\n\r\n")
_TOO_SLOW = (b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    head_seconds: float = HEAD_SECONDS
    request_seconds: float = REQUEST_SECONDS


class _Seen:
    """The transport as uvicorn's protocol sees it: every call passed on, its writes and its
    switch to another protocol reported to the connection first."""

    def __init__(self, transport: asyncio.Transport, connection: _Guarded) -> None:
        self._transport = transport
        self._connection = connection

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._connection.answering()
        self._transport.write(data)

    def writelines(self, lines: Any) -> None:
        self._connection.answering()
        self._transport.writelines(lines)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._connection.upgraded(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._connection.inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Guarded(asyncio.Protocol):
    """One connection: uvicorn's protocol inside, made when the first byte arrives (a
    connection that sends nothing costs this object and its transport, never uvicorn's
    parser), the table told what happens."""

    def __init__(self, table: ConnectionTable,
                 make_inner: Callable[[], asyncio.BaseProtocol]) -> None:
        self.table = table
        self._make_inner = make_inner
        self.inner: Any = None
        self.transport: asyncio.Transport | None = None
        self.head_bytes = 0  # bytes of the head being awaited
        self._tail = b""  # the last bytes seen, for a blank line split between two reads

    # the event loop's calls
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.table.opened(self)

    def data_received(self, data: bytes) -> None:
        if self.table.awaits_head(self):
            seen = self._tail + data
            self.head_bytes += len(data)
            if _HEAD_END in seen:
                self._tail = b""
                self.table.head_in(self)
            else:
                self._tail = seen[-3:]
        if self.inner is None:
            self.inner = self._make_inner()
            self.inner.connection_made(_Seen(self.transport, self))  # type: ignore[arg-type]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return None if self.inner is None else self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.table.closed(self)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    # what _Seen reports
    def answering(self) -> None:
        self.head_bytes = 0
        self._tail = b""
        self.table.answered(self)

    def upgraded(self, protocol: asyncio.BaseProtocol) -> None:
        self.inner = protocol
        self.table.upgraded(self)

    def close(self, answer: bytes = b"") -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if answer:
            with contextlib.suppress(Exception):
                self.transport.write(answer)
        self.transport.close()


class ConnectionTable:
    """The dashboard's open connections and their states (see the module's docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limits: ConnectionLimits,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.loop = loop
        self.limits = limits
        self._clock = clock
        self._waiting: OrderedDict[_Guarded, float] = OrderedDict()  # for a head, since
        self._busy: OrderedDict[_Guarded, float] = OrderedDict()  # head in, unanswered, since
        self._websockets: set[_Guarded] = set()
        self.pending = 0  # accepted, their transport being made
        self.refused = 0  # new connections answered 503 at the cap
        self._evictions = EVICTIONS_PER_SECOND  # the budget of idle ones closed to make room
        self._evicted_at = clock()
        self.closed_idle = 0  # closed for want of a head, or to make room
        self._sweeper: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._waiting) + len(self._busy) + len(self._websockets) + self.pending

    def start(self) -> None:
        self._sweeper = self.loop.call_later(_SWEEP_SECONDS, self._sweep)

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    # ----------------------------------------------------------------------- transitions
    def make_room(self) -> bool:
        """True when a new connection may be served, closing the longest idle one if needed;
        False: the port is full for now. `eviction_wait()` says how long the port should rest
        before the next eviction."""
        if len(self) < self.limits.max_connections:
            return True
        if not self._waiting:
            return False
        connection, since = next(iter(self._waiting.items()))
        now = self._clock()
        if now - since < IDLE_AFTER_SECONDS:
            return False
        self._refill(now)
        self._evictions -= 1
        self._forget(connection)
        self.closed_idle += 1
        connection.close(_TOO_SLOW if connection.head_bytes else b"")
        return True

    def eviction_wait(self) -> float:
        """Seconds until the eviction budget holds one again (0 while it does)."""
        self._refill(self._clock())
        return max(0.0, (1 - self._evictions) / EVICTIONS_PER_SECOND)

    def _refill(self, now: float) -> None:
        self._evictions = min(EVICTIONS_PER_SECOND,
                              self._evictions + (now - self._evicted_at) * EVICTIONS_PER_SECOND)
        self._evicted_at = now

    def opened(self, connection: _Guarded) -> None:
        # Pending until now, waiting from now: counted once. (Counted as both until the
        # accept's task resumed, the table once held 263 at a cap of 260 and refused below it.)
        self.pending -= 1
        self._waiting[connection] = self._clock()

    def awaits_head(self, connection: _Guarded) -> bool:
        return connection in self._waiting

    def head_in(self, connection: _Guarded) -> None:
        self._waiting.pop(connection, None)
        self._busy[connection] = self._clock()

    def answered(self, connection: _Guarded) -> None:
        """A byte answered: from now the connection awaits its next head (keep-alive), and
        this answer, if it goes on, keeps it from counting as idle."""
        if connection in self._websockets:
            return
        self._busy.pop(connection, None)
        self._waiting.pop(connection, None)
        self._waiting[connection] = self._clock()

    def upgraded(self, connection: _Guarded) -> None:
        self._forget(connection)
        self._websockets.add(connection)

    def closed(self, connection: _Guarded) -> None:
        self._forget(connection)

    def _forget(self, connection: _Guarded) -> None:
        self._waiting.pop(connection, None)
        self._busy.pop(connection, None)
        self._websockets.discard(connection)

    # --------------------------------------------------------------------------- timing
    def _sweep(self) -> None:
        now = self._clock()
        limits = self.limits
        while self._waiting:
            connection, since = next(iter(self._waiting.items()))
            if now - since <= limits.head_seconds:
                break
            transport = connection.transport
            if transport is not None and transport.get_write_buffer_size():
                self._waiting.move_to_end(connection)  # still sending an answer: not idle
                self._waiting[connection] = now
                continue
            self._forget(connection)
            self.closed_idle += 1
            connection.close(_TOO_SLOW if connection.head_bytes else b"")
        while self._busy:
            connection, since = next(iter(self._busy.items()))
            if now - since <= limits.request_seconds:
                break
            self._forget(connection)
            connection.close(_TOO_SLOW)
        self._sweeper = self.loop.call_later(_SWEEP_SECONDS, self._sweep)


class Listener:
    """The dashboard's accept loop, returned to uvicorn in place of an asyncio.Server (it calls
    `close()` and `wait_closed()`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol_factory: Callable[[], asyncio.BaseProtocol],
                 limits: ConnectionLimits) -> None:
        self.loop = loop
        self.sock = sock
        self.sockets = (sock,)
        self.protocol_factory = protocol_factory
        self.table = ConnectionTable(loop, limits)
        self.failures = 0  # accept() calls that failed and made the loop back off
        self._listening = False
        self._closed = False
        self._resume: asyncio.TimerHandle | None = None

    def start(self) -> Listener:
        self.sock.setblocking(False)
        self.table.start()
        self._listen()
        return self

    def _listen(self) -> None:
        if not self._listening and not self._closed:
            self.loop.add_reader(self.sock.fileno(), self._ready)
            self._listening = True

    def _unlisten(self) -> None:
        if self._listening:
            self.loop.remove_reader(self.sock.fileno())
            self._listening = False

    def _ready(self) -> None:
        for _ in range(_PER_TURN):
            if self._closed:
                return
            try:
                connection, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as error:
                self._back_off(error)
                return
            connection.setblocking(False)
            if not self.table.make_room():
                # Full: this one is answered 503; the next ones wait in the backlog a moment
                # (a slot frees as connections end or time out), rather than being taken and
                # refused as fast as they come.
                self.table.refused += 1
                with contextlib.suppress(OSError):
                    connection.send(_REFUSED)
                connection.close()
                self._pause(_FULL_PAUSE)
                return
            self.table.pending += 1
            self.loop.create_task(self._serve(connection))
            rest = self.table.eviction_wait()
            if rest:
                self._pause(rest)  # evictions paced: the next newcomers wait in the backlog
                return

    async def _serve(self, connection: socket.socket) -> None:
        guarded = _Guarded(self.table, self.protocol_factory)
        try:
            await self.loop.connect_accepted_socket(  # type: ignore[call-overload]
                lambda: guarded, connection)
        except Exception:  # noqa: BLE001 - a connection that could not be set up is dropped
            connection.close()
            if guarded.transport is None:  # never opened: still counted as pending
                self.table.pending -= 1

    def _pause(self, seconds: float) -> None:
        """Leave the socket alone for `seconds` (or longer, when a longer pause is on)."""
        self._unlisten()
        until = self.loop.time() + seconds
        if self._resume is not None:
            if self._resume.when() >= until:
                return
            self._resume.cancel()
        self._resume = self.loop.call_at(until, self._listen_again)

    def _listen_again(self) -> None:
        self._resume = None
        self._listen()

    def _back_off(self, error: OSError) -> None:
        self.failures += 1
        self._pause(BACK_OFF_SECONDS)
        _LOG.warning("dashboard: accept() failed (%s); new connections wait in the backlog, "
                     "accepted again every %g s", error.strerror or error, BACK_OFF_SECONDS,
                     extra={"event": "accept_failed", "listener": "dashboard",
                            "errno": error.errno})

    # what uvicorn calls
    def close(self) -> None:
        self._closed = True
        if self._resume is not None:
            self._resume.cancel()
        self._unlisten()
        self.table.stop()

    async def wait_closed(self) -> None:
        return None

    def is_serving(self) -> bool:
        return not self._closed


@contextlib.contextmanager
def take_over(loop: asyncio.AbstractEventLoop, port: int,
              limits: ConnectionLimits) -> Iterator[list[Listener]]:
    """While in this block, the loop's `create_server` for a socket listening on `port` gives
    a `Listener` (appended to the list yielded) instead of an asyncio.Server; any other call is
    asyncio's own. Entered in the app's lifespan, before uvicorn creates its server."""
    taken: list[Listener] = []
    own = loop.create_server

    async def create_server(protocol_factory: Callable[[], asyncio.BaseProtocol],
                            *args: Any, **kwargs: Any) -> Any:
        sock = kwargs.get("sock")
        if (sock is None or args or kwargs.get("ssl") is not None or taken
                or sock.getsockname()[1] != port):
            return await own(protocol_factory, *args, **kwargs)
        listener = Listener(loop, sock, protocol_factory, limits).start()
        taken.append(listener)
        return listener

    loop.create_server = create_server  # type: ignore[method-assign]
    try:
        yield taken
    finally:
        with contextlib.suppress(AttributeError):
            del loop.create_server  # the class's own again
