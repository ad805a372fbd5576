"""A streamed answer of the OTLP/HTTP port, on the worker thread's side: an endpoint that
`streams` (the read API) writes its answer from its worker thread as it makes it, each piece
handed to the event loop's thread, which sends it in chunks (Transfer-Encoding: chunked,
http_exchange.py). The thread waits while STREAM_WINDOW chunks are still on their way to the
client, so an answer of any size holds a few chunks of memory, and a client that takes nothing
for `body_timeout` is dropped."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tornado.ioloop import IOLoop

from ingest.receivers.http_routes import ClientGone

# Chunks of a streamed answer on their way to the client at once (written to the socket or
# waiting to be): the worker that makes the answer waits beyond them.
STREAM_WINDOW = 4


class WindowedAnswerStream:
    """http_routes.AnswerStream for one exchange: called from the endpoint's worker thread,
    each call handed to the event loop's thread (`send_head`, `send_chunk`: the exchange's),
    at most STREAM_WINDOW chunks in flight."""

    def __init__(self, loop: IOLoop | None, patience: float,
                 send_head: Callable[[int, str, dict[str, str]], None],
                 send_chunk: Callable[[bytes, Callable[[], None]], None]) -> None:
        self._loop = loop
        self._room = threading.Semaphore(STREAM_WINDOW)
        self._patience = patience
        self._send_head = send_head
        self._send_chunk = send_chunk
        self.started = False
        self.gone = threading.Event()

    def start(self, status: int, content_type: str, headers: dict[str, str]) -> None:
        if self.started:
            raise RuntimeError("a streamed answer has one head")
        self.started = True
        self._loop.add_callback(  # type: ignore[union-attr]
            self._send_head, status, content_type, dict(headers))

    def write(self, data: bytes) -> None:
        if not self.started:
            raise RuntimeError("start the streamed answer before writing it")
        if not data:
            return
        if self.gone.is_set():
            raise ClientGone("the client went away")
        if not self._room.acquire(timeout=self._patience):
            self.gone.set()
            raise ClientGone(f"the client took nothing of the answer for "
                             f"{self._patience:g} s")
        if self.gone.is_set():
            self._room.release()
            raise ClientGone("the client went away")
        self._loop.add_callback(  # type: ignore[union-attr]
            self._send_chunk, bytes(data), self._room.release)
