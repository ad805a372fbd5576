"""The OTLP/HTTP port: Tornado's HTTP/1.1 server, a route table, and the limits around it.

Tornado parses the framing (request heads, Content-Length, chunked bodies with strict hex
sizes, keep-alive) on one event-loop thread, so an idle or slow connection costs a socket and
no thread. On top of it:
- routes: path → Endpoint (http_routes.py); POST /v1/traces and POST /v1/logs are entries
  (otlp_endpoint.py), and the caller may hand more at construction (`budgetscope serve` hands
  the operator's pages, /budgets, /prices and /cli: budgetscope/server/); every route but the
  exports and the probes answers only known Host names and same-origin browsers
  (host_check.py), before its own checks;
- limits: the body limit on the wire (413 before reading a byte when Content-Length says so,
  or as soon as a chunked body passes it; gzip is counted after decompression, in the
  endpoint), the head within the idle timeout, the body within `body_timeout` (400), open
  connections capped (connection_guards.py), requests in progress capped (503 + Retry-After),
  bytes of bodies still arriving capped (503 + Retry-After);
- threads: a whole request is answered in a pool, exports in one (decode, then wait for the
  commit: they are answered only after it), pages in another, so that exports waiting on a
  busy writer never delay a health check; an endpoint with a bounded pool of its own
  (`Endpoint.pool`: serve's read API, /budgets) is answered there, so that it never takes an
  export's slot. Commits go through the single group-commit writer;
- streamed answers: an endpoint that `streams` (the read API) writes its answer from its
  worker thread as it makes it, in chunks (Transfer-Encoding: chunked); the thread waits while
  STREAM_WINDOW chunks are still on their way to the client, so an answer of any size holds a
  few chunks of memory, and a client that takes nothing for `body_timeout` is dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from http import HTTPStatus
from urllib.parse import urlsplit

from tornado import httputil
from tornado.httpserver import HTTPServer
from tornado.ioloop import IOLoop
from tornado.iostream import IOStream, StreamClosedError
from tornado.netutil import bind_sockets

from ingest.receivers.acceptor import Acceptor
from ingest.receivers.auth import BearerToken, FailedTokens
from ingest.receivers.bounded_pool import BoundedPool, PoolFull
from ingest.receivers.connection_guards import (
    LINGER_BYTES,
    LINGER_SECONDS,
    REFUSED_CONNECTION,
    ConnectionTable,
    Lingering,
    ReceivingBytes,
)
from ingest.receivers.counters import HTTP_REASONS
from ingest.receivers.host_check import HostPolicy, LoopbackHosts, headers_of
from ingest.receivers.http_routes import (
    ClientGone,
    Endpoint,
    Head,
    Reply,
    Request,
    status_reply,
)
from ingest.receivers.limits import BodyTooLarge, Limits
from ingest.receivers.log_intake import LogIntake
from ingest.receivers.otlp_endpoint import LOGS_PATH, TRACES_PATH, OtlpExportEndpoint
from ingest.receivers.span_intake import RETRY_AFTER_UNAVAILABLE, SpanIntake
from ingest.receivers.status import INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE
from store import joined

_LOG = logging.getLogger(__name__)
_DIGITS = re.compile(r"[0-9]+")
_BODY_METHODS = ("POST", "PUT", "PATCH")
# Listen backlog: a burst of exporters connecting at once queues in the kernel.
_BACKLOG = 1024
_MAX_HEAD_BYTES = 64 * 1024
_PAGE_THREADS = 4
# Seconds a client refused for a full server (requests in progress, bytes arriving) waits.
_RETRY_AFTER_BUSY = 1
# Chunks of a streamed answer on their way to the client at once (written to the socket or
# waiting to be): the worker that makes the answer waits beyond them.
STREAM_WINDOW = 4


def _wire_limit(head: Head, max_body_bytes: int) -> int:
    """Most body bytes accepted on the wire. A gzip body's limit is counted after inflating
    it (in the endpoint); deflate grows incompressible data by under 0.1 %, so a compressed
    body longer than this cannot inflate to fewer than `max_body_bytes`."""
    if (head.headers.get("Content-Encoding") or "").strip().lower() == "gzip":
        return max_body_bytes + max_body_bytes // 1024 + 1024
    return max_body_bytes


class HttpReceiver:
    """Listens on (host, port) in a background thread (store/lifecycle.py's shape): `stop()`
    drains in-flight requests, then the thread ends; `drained` says whether all finished."""

    def __init__(self, traces: SpanIntake, host: str, port: int, *, token: BearerToken,
                 limits: Limits, hosts: HostPolicy | None = None,
                 failed_tokens: FailedTokens | None = None,
                 routes: Mapping[str, Endpoint] | None = None) -> None:
        """`routes`: endpoints served beside the exports (path → Endpoint), which may not take
        the exports' paths."""
        self.traces = traces
        self.token = token
        self.limits = limits
        # Wrong tokens per client address (auth.py): this port's own count.
        self.failed_tokens = failed_tokens if failed_tokens is not None else FailedTokens()
        # Host and Origin of every route but the exports and the probes (host_check.py).
        self.hosts: HostPolicy = hosts if hosts is not None else LoopbackHosts(host)
        self.stopping = False
        # Whether every request in flight at stop() finished within its grace (None: not yet).
        self.drained: bool | None = None
        self._stop_asked = False
        logs = LogIntake(traces)
        self.routes: dict[str, Endpoint] = {
            TRACES_PATH: OtlpExportEndpoint(traces.export_protobuf, traces.export_json,
                                            token, traces.counters, limits.max_body_bytes),
            LOGS_PATH: OtlpExportEndpoint(logs.export_protobuf, logs.export_json,
                                          token, traces.counters, limits.max_body_bytes),
        }
        taken = set(self.routes) & set(routes or {})
        if taken:
            raise ValueError(f"{', '.join(sorted(taken))}: the OTLP exports' own paths")
        self.routes.update(routes or {})
        self.connections = ConnectionTable(limits.max_connections)
        self.receiving = ReceivingBytes(limits.max_receiving_bytes)
        self.lingering = Lingering()
        self.in_progress = 0  # export requests handed to the pool and not yet answered
        # Raises OSError when the port is taken (SO_REUSEADDR only: never SO_REUSEPORT, so a
        # second server cannot share the port).
        self._sockets = bind_sockets(port, address=host, family=_family(host), backlog=_BACKLOG)
        self.host = host
        self.port = self._sockets[0].getsockname()[1]
        self.export_pool = ThreadPoolExecutor(limits.max_requests,
                                              thread_name_prefix="budgetscope-otlp-http")
        self.page_pool = ThreadPoolExecutor(_PAGE_THREADS,
                                            thread_name_prefix="budgetscope-http-pages")
        self._loop = asyncio.new_event_loop()
        self.io_loop: IOLoop | None = None
        self._server: _Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="budgetscope-otlp-http-loop",
                                        daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}{TRACES_PATH}"

    @property
    def name(self) -> str:
        return self._thread.name

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self.io_loop = IOLoop.current()
        self._server = _Server(self)
        self._server.add_sockets(self._sockets)
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()
            self._shutdown_pools()

    def stop(self, grace: float = 30.0) -> None:
        """Stop accepting, let in-flight requests finish (their commits included) for up to
        `grace` seconds, close idle keep-alive connections; then the thread ends. Never
        started: the port is closed at once."""
        if self._stop_asked:
            return
        self._stop_asked = True
        if not self._thread.is_alive():
            for sock in self._sockets:
                sock.close()
            self._shutdown_pools()
            self.drained = True
            return
        asyncio.run_coroutine_threadsafe(self._drain(grace), self._loop).add_done_callback(
            self._drain_finished)

    def _drain_finished(self, drain: Future) -> None:
        """Once the drain has finished (on the loop's thread, or on stop()'s when it finished
        first): record it and end the loop."""
        try:
            self.drained = drain.result()
        except Exception:  # noqa: BLE001 - the thread must end all the same
            _LOG.exception("draining the OTLP/HTTP port failed")
            self.drained = False
        self._loop.call_soon_threadsafe(self._loop.stop)

    def join(self, timeout: float | None = None) -> bool:
        return joined(self._thread, timeout)

    def _shutdown_pools(self) -> None:
        for entry in self.routes.values():
            own_pool = getattr(entry, "pool", None)
            if own_pool is not None:
                own_pool.shutdown()
        self.export_pool.shutdown(wait=False)
        self.page_pool.shutdown(wait=False)

    async def _drain(self, timeout: float) -> bool:
        assert self._server is not None
        self._server.stop()  # no longer listening
        self.stopping = True
        self.connections.close_idle()
        deadline = self._loop.time() + timeout
        while (self.connections.busy or self.in_progress) and self._loop.time() < deadline:
            await asyncio.sleep(0.02)
        finished = not (self.connections.busy or self.in_progress)
        self.connections.close_all()
        return finished

    def count_refusal(self, head: Head, reply: Reply) -> None:
        """A refused POST counts unless it reached an endpoint that is no OTLP export (a page
        or /budgets answering 401 or 400 is no refused export)."""
        endpoint = self.routes.get(head.path)
        if head.method in _BODY_METHODS and (endpoint is None or endpoint.otlp):
            self.traces.counters.refused(
                "http", head.peer, HTTP_REASONS.get(reply.status, str(reply.status)),
                reply.message)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_UNSPEC


class _Server(HTTPServer):
    # HTTPServer is a tornado Configurable: its constructor's arguments go to initialize().
    def initialize(self, receiver: HttpReceiver) -> None:  # type: ignore[override]
        self.receiver = receiver
        limits = receiver.limits
        super().initialize(
            lambda request: None,  # unused: start_request below answers every request
            idle_connection_timeout=limits.socket_timeout,  # the head's timeout too
            max_header_size=_MAX_HEAD_BYTES,
            max_body_size=limits.max_body_bytes,
            # Reads of up to 256 KiB: a 125 KiB request is one read instead of two. With 64 KiB
            # bench_receivers (16 exporters, same run, against the stdlib receiver, a machine
            # at load 13 on 2 cores) gave x0.54-x0.87 of its spans/s; with 256 KiB x0.91-x1.18.
            chunk_size=256 * 1024,
        )

    def add_sockets(self, sockets: list[socket.socket]) -> None:
        """Our accept loop rather than tornado's, which spins on EMFILE (acceptor.py)."""
        self.acceptors = [Acceptor(sock, IOLoop.current(), self._accepted, "OTLP/HTTP")
                          for sock in sockets]
        for acceptor in self.acceptors:
            acceptor.start()

    def _accepted(self, connection: socket.socket, address: tuple) -> None:
        # What tornado's TCPServer does with a new connection, TLS aside (none here).
        self.handle_stream(IOStream(connection, max_buffer_size=self.max_buffer_size,
                                    read_chunk_size=self.read_chunk_size), address)

    def stop(self) -> None:
        for acceptor in getattr(self, "acceptors", []):
            acceptor.stop()
            acceptor.sock.close()
        super().stop()

    def handle_stream(self, stream: IOStream, address: tuple) -> None:
        receiver = self.receiver
        if receiver.stopping:
            stream.close()
            return
        if not receiver.connections.make_room():
            # Every connection is busy with a request: answered at once, not queued.
            asyncio.ensure_future(receiver.lingering.answer_and_linger(
                stream, REFUSED_CONNECTION))
            return
        receiver.connections.waiting(stream)
        super().handle_stream(stream, address)

    def start_request(self, server_conn: object,
                      request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        return _Exchange(self.receiver, server_conn.stream, request_conn)  # type: ignore[attr-defined]

    def on_close(self, server_conn: object) -> None:
        self.receiver.connections.closed(server_conn.stream)  # type: ignore[attr-defined]
        super().on_close(server_conn)  # type: ignore[arg-type]


class _Exchange(httputil.HTTPMessageDelegate):
    """One request on one connection, from its head to its answer."""

    def __init__(self, receiver: HttpReceiver, stream: IOStream,
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
        self.streaming: _AnswerStream | None = None  # an answer written as it is made
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
        refusal = self._refusal(head)
        if refusal is not None:
            self._refuse_unread(head, refusal)
            return
        self.limit = _wire_limit(head, self._body_limit())
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
        if head.method not in _BODY_METHODS:
            return  # a body on a GET is ignored
        self.received += len(chunk)
        if self.received > self.limit:
            self._refuse_reading(status_reply(
                head, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, RESOURCE_EXHAUSTED,
                str(BodyTooLarge(self._body_limit()))))
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
            self._answer(self._shutting_down(head))
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
            self._answer(self._shutting_down(head))
            return
        self.receiver.io_loop.add_future(future, self._responded)  # type: ignore[union-attr]

    def _request(self, head: Head, body: bytes) -> Request:
        if not getattr(self.endpoint, "streams", False):
            return Request(head, body)
        self.streaming = _AnswerStream(self)
        return Request(head, body, self.streaming)

    def on_connection_close(self) -> None:
        self.gone = True
        if self.streaming is not None:
            self.streaming.gone.set()
        self._cancel_timer()
        self._give_back()
        self.parts = []

    # ------------------------------------------------------------------------- decisions
    def _refusal(self, head: Head) -> Reply | None:
        receiver = self.receiver
        if receiver.stopping:
            return self._shutting_down(head)
        endpoint = receiver.routes.get(head.path)
        if endpoint is None:
            exports = sorted(path for path, entry in receiver.routes.items() if entry.otlp)
            return status_reply(head, HTTPStatus.NOT_FOUND, INVALID_ARGUMENT,
                                f"no such endpoint {head.path!r}; "
                                f"exports go to {', '.join(exports)}")
        if head.method not in endpoint.methods:
            allowed = ", ".join(endpoint.methods)
            return status_reply(head, HTTPStatus.METHOD_NOT_ALLOWED, INVALID_ARGUMENT,
                                f"use {allowed} {head.path}", {"Allow": allowed})
        self.endpoint = endpoint
        if not (endpoint.otlp or endpoint.probe):
            # Before the token: a rebound page must not even learn whether a guess was right.
            refused = receiver.hosts.refusal(headers_of(head.headers, "Host"),
                                             headers_of(head.headers, "Origin"))
            if refused is not None:
                return Reply(int(HTTPStatus.FORBIDDEN), "application/json",
                             (json.dumps({"error": refused}) + "\n").encode(), {}, refused)
        throttled = self._throttled(head)
        if throttled is not None:
            return throttled
        refusal = endpoint.admit(head)
        if refusal is not None:
            self._note_token(refusal)
        if refusal is not None or head.method not in _BODY_METHODS:
            return refusal
        return self._framing_refusal(head)

    def _throttled(self, head: Head) -> Reply | None:
        """429 for a wrong token from a client that sent too many wrong ones (auth.FailedTokens),
        not counted; the right token is let through, whoever else guessed from its address."""
        receiver = self.receiver
        authorization = head.headers.get("Authorization")
        probe = self.endpoint is not None and self.endpoint.probe
        if not receiver.token.required or probe or authorization is None:
            return None
        wait = receiver.failed_tokens.wait(head.peer)
        if not wait or receiver.token.allows(authorization):
            return None
        seconds = math.ceil(wait)
        return status_reply(head, HTTPStatus.TOO_MANY_REQUESTS, RESOURCE_EXHAUSTED,
                            f"too many wrong tokens from {head.peer}; the next may be tried in "
                            f"{seconds} s", retry_after=seconds)

    def _note_token(self, reply: Reply) -> None:
        """A 401 to a request that carried a token: a wrong token from this client."""
        head = self.head
        if reply.status == HTTPStatus.UNAUTHORIZED and head is not None \
                and head.headers.get("Authorization") is not None:
            self.receiver.failed_tokens.failed(head.peer)

    def _framing_refusal(self, head: Head) -> Reply | None:
        """What tornado would refuse with a bare 400, refused with a message instead."""
        headers = head.headers
        transfer = headers.get("Transfer-Encoding")
        length = headers.get("Content-Length")
        if transfer is not None:
            if length is not None:
                return status_reply(head, HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT,
                                    "both Content-Length and Transfer-Encoding")
            if transfer.strip().lower() != "chunked":
                return status_reply(head, HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT,
                                    f"unsupported Transfer-Encoding {transfer!r}")
            return None
        if length is None:
            return status_reply(head, HTTPStatus.LENGTH_REQUIRED, INVALID_ARGUMENT,
                                "Content-Length or chunked Transfer-Encoding required")
        if not _DIGITS.fullmatch(length.strip()):
            return status_reply(head, HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT,
                                f"bad Content-Length {length!r}")
        if int(length) > _wire_limit(head, self._body_limit()):
            # Refused before reading a byte of it.
            return status_reply(head, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, RESOURCE_EXHAUSTED,
                                str(BodyTooLarge(self._body_limit())))
        return None

    def _body_limit(self) -> int:
        limit = self.receiver.limits.max_body_bytes
        own = self.endpoint.max_body_bytes if self.endpoint is not None else None
        return limit if own is None else min(limit, own)

    @staticmethod
    def _shutting_down(head: Head) -> Reply:
        return status_reply(head, HTTPStatus.SERVICE_UNAVAILABLE, UNAVAILABLE,
                            "server is shutting down", retry_after=RETRY_AFTER_UNAVAILABLE)

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
            stream, _response_bytes(reply)))

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
        self._note_token(reply)  # a page's own token check (/metrics)
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
        spelled = _SpelledHeaders()
        spelled["Content-Type"] = content_type
        for name, value in headers.items():
            spelled[name] = value
        if self.receiver.stopping:
            spelled["Connection"] = "close"
        # No Content-Length: tornado sends the body chunked, as it is written.
        self.connection.write_headers(
            httputil.ResponseStartLine("HTTP/1.1", status, _phrase(status)), spelled)

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
        headers = _SpelledHeaders()
        headers["Content-Type"] = reply.content_type
        headers["Content-Length"] = str(len(reply.body))
        for name, value in reply.headers.items():
            headers[name] = value
        start = httputil.ResponseStartLine("HTTP/1.1", reply.status, _phrase(reply.status))
        return self.connection.write_headers(start, headers, reply.body)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self.receiver.io_loop.remove_timeout(self._timer)  # type: ignore[union-attr]
            self._timer = None

    def _give_back(self) -> None:
        if self.held:
            self.receiver.receiving.give_back(self.held)
            self.held = 0


class _AnswerStream:
    """http_routes.AnswerStream for one exchange: called from the endpoint's worker thread,
    each call handed to the event loop's thread, at most STREAM_WINDOW chunks in flight."""

    def __init__(self, exchange: _Exchange) -> None:
        self._exchange = exchange
        self._loop = exchange.receiver.io_loop
        self._room = threading.Semaphore(STREAM_WINDOW)
        self._patience = exchange.receiver.limits.body_timeout
        self.started = False
        self.gone = threading.Event()

    def start(self, status: int, content_type: str, headers: dict[str, str]) -> None:
        if self.started:
            raise RuntimeError("a streamed answer has one head")
        self.started = True
        self._loop.add_callback(  # type: ignore[union-attr]
            self._exchange._stream_head, status, content_type, dict(headers))

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
            self._exchange._stream_chunk, bytes(data), self._room.release)


class _SpelledHeaders(httputil.HTTPHeaders):
    """Header names sent as we spell them: tornado would send `Www-Authenticate`, and clients
    that look the name up case-sensitively (a dict of http.client's headers) miss it."""

    def __setitem__(self, name: str, value: str) -> None:
        super().__setitem__(name, value)
        self.__dict__.setdefault("_spelling", {})[name.lower()] = name

    def get_all(self):  # type: ignore[no-untyped-def]
        spelling = self.__dict__.get("_spelling", {})
        for name, value in super().get_all():
            yield spelling.get(name.lower(), name), value


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _response_bytes(reply: Reply) -> bytes:
    lines = [f"HTTP/1.1 {reply.status} {_phrase(reply.status)}",
             f"Content-Type: {reply.content_type}", f"Content-Length: {len(reply.body)}",
             "Connection: close"]
    lines += [f"{name}: {value}" for name, value in reply.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + reply.body
