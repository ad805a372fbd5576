"""One request on the OTLP/HTTP port, from its head to its answer (Exchange: tornado's
HTTPMessageDelegate for it, on the event loop's thread): refused from its head
(http_admission.py) or read under the limits: 413 as soon as a chunked body passes the body
limit (gzip is counted after decompression, in the endpoint); the body within `body_timeout`
(400); bytes of bodies still arriving capped (503 + Retry-After); requests in progress capped
(503 + Retry-After); then answered from the pool that answers it (http_receiver.py), whole or
streamed as it is made (the worker's side of a streamed answer: http_answer_stream.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from concurrent.futures import Future
from http import HTTPStatus
from urllib.parse import urlsplit

from tornado import httputil
from tornado.iostream import IOStream, StreamClosedError

from ingest.receivers.bounded_pool import BoundedPool, PoolFull
from ingest.receivers.connection_guards import LINGER_BYTES, LINGER_SECONDS
from ingest.receivers.http_admission import (
    BODY_METHODS,
    admission,
    body_limit,
    note_token,
    shutting_down,
    wire_limit,
)
from ingest.receivers.http_answer_stream import WindowedAnswerStream
from ingest.receivers.http_port import Port
from ingest.receivers.http_routes import Endpoint, Head, Reply, Request, status_reply
from ingest.receivers.http_wire import SpelledHeaders, phrase, response_bytes
from ingest.receivers.limits import BodyTooLarge
from ingest.receivers.status import INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE

# The logger the exchange wrote to while it was part of http_receiver.py: its lines keep it.
_LOG = logging.getLogger("ingest.receivers.http_receiver")
# Seconds a client refused for a full server (requests in progress, bytes arriving) waits.
_RETRY_AFTER_BUSY = 1


class Exchange(httputil.HTTPMessageDelegate):
    """One request on one connection, from its head to its answer."""

    def __init__(self, receiver: Port, stream: IOStream,
                 connection: httputil.HTTPConnection) -> None:
        self.receiver = receiver
        self.stream = stream
        self.connection = connection
        self.head: Head | None = None
        self.endpoint: Endpoint | None = None
        self.parts: list[bytes] = []
        self.received = 0  # body bytes on the wire
        self.held = 0  # of them, counted against receiver.receiving
        self.limit = 0
        self.refused: Reply | None = None  # answered while the body was still arriving
        self.drained = 0
        self.read_done = False
        self.gone = False
        self.answered = False
        self._timer: object | None = None
        self._written: Future | None = None
        self.streaming: WindowedAnswerStream | None = None  # an answer written as it is made
        receiver.connections.waiting(stream)

    # --------------------------------------------------------------- tornado's callbacks
    def headers_received(self, start_line: httputil.RequestStartLine,  # type: ignore[override]
                         headers: httputil.HTTPHeaders) -> None:
        receiver = self.receiver
        receiver.connections.started(self.stream)
        split = urlsplit(start_line.path)
        peer = getattr(self.connection.context, "remote_ip", "") or ""
        head = self.head = Head(start_line.method.upper(), split.path, split.query, headers,
                                peer)
        self.endpoint, refusal = admission(receiver, head)
        if refusal is not None:
            self._refuse_unread(head, refusal)
            return
        self.limit = wire_limit(head, body_limit(receiver.limits, self.endpoint))
        # Tornado refuses a chunked body whose declared sizes pass its limit with a bare 400,
        # before a byte of the chunk is read; past ours by less, data_received refuses it
        # with a 413 that says so. A chunk declaring more than that is hostile: the bare 400.
        self.connection.set_max_body_size(  # type: ignore[attr-defined]
            self.limit + LINGER_BYTES)
        self._timer = receiver.io_loop.call_later(  # type: ignore[union-attr]
            receiver.limits.body_timeout, self._too_slow)

    def data_received(self, chunk: bytes) -> None:
        if self.refused is not None:
            self.drained += len(chunk)
            if self.drained > LINGER_BYTES:
                self._close_refused()
            return
        head = self.head
        assert head is not None
        if head.method not in BODY_METHODS:
            return  # a body on a GET is ignored
        self.received += len(chunk)
        if self.received > self.limit:
            self._refuse_reading(status_reply(
                head, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, RESOURCE_EXHAUSTED,
                str(BodyTooLarge(body_limit(self.receiver.limits, self.endpoint)))))
            return
        if not self.receiver.receiving.take(len(chunk)):
            self._refuse_reading(status_reply(
                head, HTTPStatus.SERVICE_UNAVAILABLE, UNAVAILABLE,
                "the server is receiving too many bodies at once; retry",
                retry_after=_RETRY_AFTER_BUSY))
            return
        self.held += len(chunk)
        self.parts.append(chunk)

    def finish(self) -> None:
        self.read_done = True
        self._cancel_timer()
        if self.refused is not None:
            self._close_refused()
            return
        head, endpoint = self.head, self.endpoint
        assert head is not None and endpoint is not None
        body = b"".join(self.parts)
        self.parts = []
        self._give_back()
        receiver = self.receiver
        own_pool = getattr(endpoint, "pool", None)  # an entry without the attribute has none
        if own_pool is not None:
            self._submit_to_own_pool(own_pool, head, body)
            return
        if endpoint.exports:
            if receiver.in_progress >= receiver.limits.max_requests:
                self._answer(status_reply(
                    head, HTTPStatus.SERVICE_UNAVAILABLE, UNAVAILABLE,
                    f"{receiver.in_progress} requests in progress (the most at once); retry",
                    retry_after=_RETRY_AFTER_BUSY))
                return
            receiver.in_progress += 1
            pool = receiver.export_pool
        else:
            pool = receiver.page_pool
        try:
            future = pool.submit(endpoint.respond, self._request(head, body))
        except RuntimeError:  # the pool is shut down: the server is stopping
            if endpoint.exports:
                receiver.in_progress -= 1
            self._answer(shutting_down(head))
            return
        receiver.io_loop.add_future(future, self._responded)  # type: ignore[union-attr]

    def _submit_to_own_pool(self, pool: BoundedPool, head: Head, body: bytes) -> None:
        assert self.endpoint is not None
        try:
            future = pool.submit(self.endpoint.respond, self._request(head, body))
        except PoolFull as full:
            self._answer(Reply(int(HTTPStatus.SERVICE_UNAVAILABLE), "application/json",
                               (json.dumps({"error": f"{full}; retry"}) + "\n").encode(),
                               {"Retry-After": str(_RETRY_AFTER_BUSY)}, str(full)))
            return
        except RuntimeError:  # shut down: the server is stopping
            self._answer(shutting_down(head))
            return
        self.receiver.io_loop.add_future(future, self._responded)  # type: ignore[union-attr]

    def _request(self, head: Head, body: bytes) -> Request:
        if not getattr(self.endpoint, "streams", False):
            return Request(head, body)
        receiver = self.receiver
        self.streaming = WindowedAnswerStream(receiver.io_loop, receiver.limits.body_timeout,
                                              self._stream_head, self._stream_chunk)
        return Request(head, body, self.streaming)

    def on_connection_close(self) -> None:
        self.gone = True
        if self.streaming is not None:
            self.streaming.gone.set()
        self._cancel_timer()
        self._give_back()
        self.parts = []

    def _too_slow(self) -> None:
        self._timer = None
        if self.head is None or self.refused is not None or self.read_done:
            return
        self._refuse_reading(status_reply(
            self.head, HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT,
            f"could not read the body: request took longer than "
            f"{self.receiver.limits.body_timeout:g} s to arrive"))

    # --------------------------------------------------------------------------- answers
    def _refuse_unread(self, head: Head, reply: Reply) -> None:
        """Refused from the head: the connection is taken from tornado, answered, drained
        and closed (its body cannot be framed, or is not wanted)."""
        self.receiver.count_refusal(head, reply)
        stream = self.connection.detach()  # type: ignore[attr-defined]
        self.receiver.connections.closed(stream)
        asyncio.ensure_future(self.receiver.lingering.answer_and_linger(
            stream, response_bytes(reply)))

    def _refuse_reading(self, reply: Reply) -> None:
        """Refused while the body arrives: answered now, the rest drained (bounded)."""
        assert self.head is not None
        self.receiver.count_refusal(self.head, reply)
        self._cancel_timer()
        self._give_back()
        self.parts = []
        self.refused = reply
        # Tornado stops at its own limit with a bare 400; the drain has LINGER_BYTES instead.
        self.connection.set_max_body_size(1 << 62)  # type: ignore[attr-defined]
        reply.headers["Connection"] = "close"
        self._written = self._write(reply)
        self._timer = self.receiver.io_loop.call_later(  # type: ignore[union-attr]
            LINGER_SECONDS, self._close_refused)

    def _close_refused(self) -> None:
        if self.answered:
            return
        self.answered = True
        self._cancel_timer()
        self.connection.finish()  # body unread: tornado closes once the answer is written
        if self.read_done and self._written is not None:
            self._written.add_done_callback(lambda _: self.stream.close())

    def _responded(self, future: Future) -> None:
        head, endpoint = self.head, self.endpoint
        assert head is not None and endpoint is not None
        if endpoint.exports:
            self.receiver.in_progress -= 1
        streaming = self.streaming
        try:
            reply = future.result()
        except Exception as error:  # noqa: BLE001 - a request must still be answered
            if streaming is not None and streaming.started:
                _LOG.warning("endpoint %s failed while streaming its answer: %s", head.path,
                             f"{type(error).__name__}: {error}"[:300])
                self._end_stream(complete=False)
                return
            _LOG.exception("endpoint %s failed", head.path)
            reply = status_reply(head, HTTPStatus.INTERNAL_SERVER_ERROR, 13,
                                 f"internal error: {type(error).__name__}")
        else:
            if reply.streamed or (streaming is not None and streaming.started):
                self._end_stream(complete=reply.streamed)
                return
        note_token(self.receiver, head, reply)  # a page's own token check (/metrics)
        self._answer(reply)

    def _answer(self, reply: Reply) -> None:
        head = self.head
        assert head is not None
        if reply.status >= 400:
            self.receiver.count_refusal(head, reply)
        self.receiver.connections.waiting(self.stream)
        if self.gone:
            return  # the client went away; its spans were committed or refused all the same
        closing = self.receiver.stopping
        if closing:
            reply.headers["Connection"] = "close"
        written = self._write(reply)
        self.answered = True
        self.connection.finish()
        if closing:
            written.add_done_callback(lambda _: self.stream.close())

    # ------------------------------------------------------- a streamed answer (loop side)
    def _stream_head(self, status: int, content_type: str, headers: dict[str, str]) -> None:
        if self.gone:
            return
        spelled = SpelledHeaders()
        spelled["Content-Type"] = content_type
        for name, value in headers.items():
            spelled[name] = value
        if self.receiver.stopping:
            spelled["Connection"] = "close"
        # No Content-Length: tornado sends the body chunked, as it is written.
        self.connection.write_headers(
            httputil.ResponseStartLine("HTTP/1.1", status, phrase(status)), spelled)

    def _stream_chunk(self, data: bytes, sent: Callable[[], None]) -> None:
        streaming = self.streaming
        assert streaming is not None
        if self.gone:
            sent()
            return
        try:
            written = self.connection.write(data)
        except StreamClosedError:
            self.gone = True
            streaming.gone.set()
            sent()
            return

        def done(result: Future) -> None:
            if result.cancelled() or result.exception() is not None:
                self.gone = True
                streaming.gone.set()
            sent()

        written.add_done_callback(done)

    def _end_stream(self, *, complete: bool) -> None:
        """The endpoint is done: the last chunk, or, when it failed half-way, the connection
        closed so that the client sees an answer cut short rather than a whole one."""
        self.answered = True
        self.receiver.connections.waiting(self.stream)
        if self.gone:
            return
        if not complete:
            self.stream.close()
            return
        self.connection.finish()
        if self.receiver.stopping:
            self.stream.close()

    def _write(self, reply: Reply) -> Future:
        headers = SpelledHeaders()
        headers["Content-Type"] = reply.content_type
        headers["Content-Length"] = str(len(reply.body))
        for name, value in reply.headers.items():
            headers[name] = value
        start = httputil.ResponseStartLine("HTTP/1.1", reply.status, phrase(reply.status))
        return self.connection.write_headers(start, headers, reply.body)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self.receiver.io_loop.remove_timeout(self._timer)  # type: ignore[union-attr]
            self._timer = None

    def _give_back(self) -> None:
        if self.held:
            self.receiver.receiving.give_back(self.held)
            self.held = 0
