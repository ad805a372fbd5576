"""The dashboard's accept loop (dashboard/server/connections.py) at its connection cap, on a real
listening socket and a real event loop, with a small HTTP protocol in uvicorn's place.

At the cap, every newcomer is let in by closing a connection idle for a second, and the pace
of those evictions is kept by pausing the port, never by refusing a newcomer an idle
connection could make room for. Before, a newcomer that found the second's budget of
evictions spent was answered 503 though idle connections were there to close: one in twenty
while a flood drained, and in CI a /healthz queued behind 1,100 flood connections
(tests/server/test_hostile_floods.py) was one of them.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from dashboard.server.connections import EVICTIONS_PER_SECOND, ConnectionLimits, Listener
from tests.support.flood import room_for_descriptors

CAP = int(EVICTIONS_PER_SECOND) + 60  # more evictions in a burst than a second's budget
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


class _Answers(asyncio.Protocol):
    """uvicorn's part, reduced: a complete head is answered 200 and the connection closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.head = b""

    def data_received(self, data: bytes) -> None:
        self.head += data
        if b"\r\n\r\n" in self.head:
            self.transport.write(OK)  # type: ignore[attr-defined]
            self.transport.close()


@pytest.fixture
def listener() -> Iterator[tuple[Listener, int]]:
    room_for_descriptors(6 * CAP)  # the cap twice over, both ends of each in this process
    loop = asyncio.new_event_loop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4 * CAP)
    made: list[Listener] = []
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        made.append(Listener(loop, sock, _Answers, ConnectionLimits(max_connections=CAP)))
        made[0].start()
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield made[0], sock.getsockname()[1]
    finally:
        loop.call_soon_threadsafe(made[0].close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not thread.is_alive():
            loop.close()
        sock.close()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def _status(client: socket.socket) -> bytes:
    """The status line of the answer, read to the end of the connection."""
    received = b""
    while chunk := client.recv(4096):
        received += chunk
    return received.split(b"\r\n", 1)[0]


def _fill(served: Listener, port: int) -> list[socket.socket]:
    """The cap's worth of connections that send nothing, once the listener holds them all."""
    clients = [_connect(port) for _ in range(CAP)]
    deadline = time.monotonic() + 10
    while len(served.table) < CAP and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(served.table) == CAP
    return clients


def test_a_burst_at_the_cap_is_served_by_closing_idle_connections(
        listener: tuple[Listener, int]) -> None:
    served, port = listener
    idle = _fill(served, port)
    time.sleep(1.2)  # every one of them idle for longer than a second

    burst = [_connect(port) for _ in range(CAP)]  # more than a second's budget of evictions
    assert [client.recv(1) for client in idle] == [b""] * CAP  # each made room for one
    for client in burst:
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")

    assert [_status(client) for client in burst] == [b"HTTP/1.1 200 OK"] * CAP
    assert (served.table.refused, served.table.closed_idle) == (0, CAP)
    for client in idle + burst:
        client.close()


def test_a_full_port_of_fresh_connections_refuses_the_newcomer(
        listener: tuple[Listener, int]) -> None:
    """Nothing idle for a second to close: the newcomer is answered 503 with Retry-After."""
    served, port = listener
    fresh = _fill(served, port)
    newcomer = _connect(port)
    assert _status(newcomer) == b"HTTP/1.1 503 Service Unavailable"
    assert (served.table.refused, served.table.closed_idle) == (1, 0)
    for client in [*fresh, newcomer]:
        client.close()
