"""OTLP/HTTP receiver: `POST /v1/traces` and `POST /v1/logs`, protobuf or JSON, optionally gzip.

Status codes follow the OTLP specification (opentelemetry-proto docs/specification.md, OTLP/HTTP):
200 with an ExportTraceServiceResponse (ExportLogsServiceResponse for logs; partial_success when
spans or records were refused), 400 with a
google.rpc.Status for a body that is not a request, 401 without the bearer token, 413 over the
body limit, 415 for other content types or encodings, 503 with Retry-After when the writer is
behind or a write failed (exporters retry 503; they must not retry 400/413/415).

The server is the standard library's threading HTTP server: one thread per connection (exporters
keep connections alive), a cap on connections answered 503 beyond it, socket timeouts and a
whole-body deadline so that a slow client cannot hold a thread. CPU work (decode, flatten) runs in
the connection's thread; commits go through the single group-commit writer.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from google.protobuf import json_format

from ingest.group_commit import Closed, Overloaded, WriteFailed
from ingest.receivers.auth import BearerToken
from ingest.receivers.connection_guards import DeadlineReader, Refuser
from ingest.receivers.counters import HTTP_REASONS
from ingest.receivers.export import (
    RETRY_AFTER_UNAVAILABLE,
    Accepted,
    Exporter,
    Undecodable,
    retry_after_seconds,
)
from ingest.receivers.limits import (
    BadBody,
    BodyTooLarge,
    Limits,
    gunzip_limited,
    read_chunked,
    read_exactly,
)
from ingest.receivers.logs_export import AcceptedLogs, LogsExporter
from ingest.receivers.status import (
    INVALID_ARGUMENT,
    RESOURCE_EXHAUSTED,
    UNAUTHENTICATED,
    UNAVAILABLE,
    status_json,
    status_protobuf,
)

_LOG = logging.getLogger(__name__)
TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# Bounds on draining an unread body before closing (see _Handler._linger).
_LINGER_SECONDS = 2.0
_LINGER_BYTES = 8 * 1024 * 1024
# A GET page besides the OTLP endpoint (/healthz, /readyz, /metrics): given the request's
# Authorization header, it answers (status, content type, body, extra headers).
Page = Callable[[str | None], tuple[int, str, bytes, dict[str, str]]]
# An endpoint of any method besides the OTLP one (/budgets): given (method, path, headers,
# body) it answers (status, headers, body); the body it gets is at most HANDLER_MAX_BODY_BYTES.
Handler = Callable[[str, str, Any, bytes], tuple[int, dict[str, str], bytes]]
HANDLER_MAX_BODY_BYTES = 1024 * 1024


class _Reply(Exception):
    """Answer the request with this status and a google.rpc.Status body."""

    def __init__(self, status: HTTPStatus, code: int, message: str,
                 headers: dict[str, str] | None = None, body_unread: bool = False,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}
        # Back-pressure: Retry-After, and a RetryInfo detail in the Status body (status.py).
        self.retry_after = retry_after
        if retry_after is not None:
            self.headers["Retry-After"] = str(retry_after)
        # The body was not read: the connection cannot carry another request.
        self.body_unread = body_unread


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse their connections
    server: _Server

    def version_string(self) -> str:
        return "budgetscope"

    def setup(self) -> None:
        self.timeout = self.server.receiver.limits.socket_timeout
        super().setup()
        self.rfile = DeadlineReader(self.rfile, self.connection, self.timeout)  # type: ignore[assignment]
        self.server.receiver._opened(self.connection)

    def handle_one_request(self) -> None:
        # Waiting for the next request is bounded by the idle (socket) timeout; once its first
        # byte is here, the head and the body together must arrive within body_timeout, so
        # that a client trickling a byte a second cannot hold this thread.
        reader: DeadlineReader = self.rfile  # type: ignore[assignment]
        try:
            if not reader.peek(1):
                self.close_connection = True
                return
        except OSError:
            self.close_connection = True
            return
        reader.start(self.server.receiver.limits.body_timeout)
        try:
            super().handle_one_request()
        finally:
            reader.stop()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.receiver._closed(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        _LOG.debug("%s " + format, self.address_string(), *args)

    def _handled(self) -> bool:
        """Answer the request with one of receiver.handlers, if one serves its path."""
        path = urlsplit(self.path).path
        handler = self.server.receiver.handlers.get(path)
        if handler is None:
            return False
        receiver = self.server.receiver
        if not receiver._begin(self.connection):  # in flight: stop() waits for its answer
            self._reply_error(_Reply(HTTPStatus.SERVICE_UNAVAILABLE, UNAVAILABLE,
                                     "server is shutting down", body_unread=True,
                                     retry_after=RETRY_AFTER_UNAVAILABLE), JSON)
            return True
        try:
            body = b""
            if self.command in ("POST", "PUT", "PATCH"):
                limits = receiver.limits
                try:
                    body = self._read_body(replace(limits, max_body_bytes=min(
                        limits.max_body_bytes, HANDLER_MAX_BODY_BYTES)))
                except _Reply as reply:
                    self._reply_error(reply, JSON)
                    return True
            elif self.command != "GET":
                self.close_connection = True  # a body we did not read may follow
            status, headers, answer = handler(self.command, path, self.headers, body)
            headers = dict(headers)
            content_type = headers.pop("Content-Type", JSON)
            self._send(HTTPStatus(status), content_type, answer, headers)
        finally:
            receiver._end(self.connection)
            if receiver.stopping:
                self.close_connection = True
        return True

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self._handled():
            return
        page = self.server.receiver.pages.get(urlsplit(self.path).path)
        if page is not None:
            status, content_type, body, headers = page(self.headers.get("Authorization"))
            self._send(HTTPStatus(status), content_type, body, headers)
            return
        self._reply_error(_Reply(HTTPStatus.METHOD_NOT_ALLOWED, INVALID_ARGUMENT,
                                 f"use POST {TRACES_PATH} or {LOGS_PATH}", {"Allow": "POST"}),
                          JSON)

    do_PUT = do_DELETE = do_PATCH = do_GET  # noqa: N815

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        if self._handled():
            return
        receiver = self.server.receiver
        counters = receiver.exporter.counters
        media_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        answer_type = PROTOBUF if media_type == PROTOBUF else JSON
        if not receiver._begin(self.connection):
            counters.refused("http", self.client_address[0], "unavailable", "shutting down")
            self._reply_error(_Reply(HTTPStatus.SERVICE_UNAVAILABLE, UNAVAILABLE,
                                     "server is shutting down", body_unread=True,
                                     retry_after=RETRY_AFTER_UNAVAILABLE), answer_type)
            return
        try:
            accepted = self._export(receiver, media_type)
        except _Reply as reply:
            counters.refused("http", self.client_address[0],
                             HTTP_REASONS.get(reply.status, str(int(reply.status))), reply.message)
            self._reply_error(reply, answer_type)
        else:
            accepted.record(counters, "http", self.client_address[0])
            self._reply_ok(accepted, answer_type)
        finally:
            receiver._end(self.connection)
            if receiver.stopping:
                self.close_connection = True

    def _export(self, receiver: HttpReceiver, media_type: str) -> Accepted | AcceptedLogs:
        exporter = receiver.endpoints.get(urlsplit(self.path).path)
        if exporter is None:
            raise _Reply(HTTPStatus.NOT_FOUND, INVALID_ARGUMENT,
                         f"no such endpoint {self.path!r}; traces go to {TRACES_PATH}, "
                         f"logs to {LOGS_PATH}", body_unread=True)
        if not receiver.token.allows(self.headers.get("Authorization")):
            raise _Reply(HTTPStatus.UNAUTHORIZED, UNAUTHENTICATED,
                         "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"},
                         body_unread=True)
        if media_type not in (PROTOBUF, JSON):
            raise _Reply(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, INVALID_ARGUMENT,
                         f"unsupported Content-Type {media_type or '(none)'!r}; "
                         f"send {PROTOBUF} or {JSON}", body_unread=True)
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("gzip", "identity"):
            raise _Reply(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, INVALID_ARGUMENT,
                         f"unsupported Content-Encoding {encoding!r}; send gzip or none",
                         body_unread=True)
        body = self._read_body(receiver.limits)
        try:
            limit = receiver.limits.max_body_bytes
            inflate = (lambda data: gunzip_limited(data, limit)) if encoding == "gzip" else None
            if media_type == PROTOBUF:
                return exporter.export_protobuf(body, "", inflate)
            return exporter.export_json(body, "", inflate)
        except BodyTooLarge as error:
            raise _Reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, RESOURCE_EXHAUSTED,
                         str(error)) from None
        except (BadBody, Undecodable) as error:
            raise _Reply(HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT, str(error)) from None
        except (Overloaded, Closed, WriteFailed) as error:
            raise _Reply(HTTPStatus.SERVICE_UNAVAILABLE, UNAVAILABLE, str(error),
                         retry_after=retry_after_seconds(error)) from None

    def _read_body(self, limits: Limits) -> bytes:
        deadline = time.monotonic() + limits.body_timeout
        try:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                return read_chunked(self.rfile, limits.max_body_bytes, deadline)
            length_header = self.headers.get("Content-Length")
            if length_header is None:
                raise _Reply(HTTPStatus.LENGTH_REQUIRED, INVALID_ARGUMENT,
                             "Content-Length or chunked Transfer-Encoding required",
                             body_unread=True)
            try:
                length = int(length_header)
            except ValueError:
                length = -1
            if length < 0:
                raise _Reply(HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT,
                             f"bad Content-Length {length_header!r}", body_unread=True)
            if length > limits.max_body_bytes:
                # Refused before reading a byte of it.
                raise BodyTooLarge(limits.max_body_bytes)
            return read_exactly(self.rfile, length, deadline)
        except BodyTooLarge as error:
            raise _Reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, RESOURCE_EXHAUSTED, str(error),
                         body_unread=True) from None
        except (BadBody, OSError) as error:  # includes socket timeouts
            raise _Reply(HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT,
                         f"could not read the body: {error}", body_unread=True) from None
        finally:
            self.rfile.stop()  # type: ignore[attr-defined] - the body is in: no deadline now

    def _reply_ok(self, accepted: Accepted | AcceptedLogs, answer_type: str) -> None:
        response = accepted.response()
        if answer_type == PROTOBUF:
            body = response.SerializeToString()
        else:
            body = json_format.MessageToJson(response, indent=None).encode("utf-8")
        self._send(HTTPStatus.OK, answer_type, body, {})

    def _reply_error(self, reply: _Reply, answer_type: str) -> None:
        if reply.body_unread:
            self.close_connection = True
        if answer_type == PROTOBUF:
            body = status_protobuf(reply.code, reply.message, reply.retry_after)
        else:
            body = status_json(reply.code, reply.message, reply.retry_after)
        self._send(reply.status, answer_type, body, reply.headers)
        if reply.body_unread:
            self._linger()

    def _linger(self) -> None:
        """Drop what the client is still sending, for a bounded time, before closing.

        HTTP/1.1 clients (http.client, requests) send the whole body before reading the answer;
        closing a socket with unread data makes the kernel reset the connection, and the client
        would see "broken pipe" instead of our 413/401/415."""
        self.rfile.stop()  # type: ignore[attr-defined] - bounded below instead
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)  # the answer is complete: send FIN
            self.connection.settimeout(0.5)
            deadline = time.monotonic() + _LINGER_SECONDS
            dropped = 0
            while dropped < _LINGER_BYTES and time.monotonic() < deadline:
                chunk = self.rfile.read1(256 * 1024)
                if not chunk:
                    break
                dropped += len(chunk)
        except OSError:
            pass  # the client went away first: nothing left to protect

    def _send(self, status: HTTPStatus, content_type: str, body: bytes,
              headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # stop() drains requests itself; idle keep-alives must not block exit
    block_on_close = False
    allow_reuse_address = True
    # Listen backlog (the stdlib default is 5): a burst of exporters connecting at once must
    # queue in the kernel, not be dropped.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], receiver: HttpReceiver) -> None:
        self.receiver = receiver
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.receiver._slots.acquire(blocking=False):
            # Over the connection cap: answer at once rather than queue a thread.
            self.receiver._refuser.refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.receiver._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.receiver._slots.release()


class HttpReceiver:
    """Listens on (host, port) in a background thread; `stop()` drains in-flight requests."""

    def __init__(self, exporter: Exporter, host: str, port: int, *, token: BearerToken,
                 limits: Limits) -> None:
        self.exporter = exporter
        # POST path → what decodes and commits its bodies (one small module per signal).
        self.endpoints: dict[str, Exporter | LogsExporter] = {
            TRACES_PATH: exporter, LOGS_PATH: LogsExporter(exporter)}
        self.token = token
        self.limits = limits
        self.stopping = False
        self.pages: dict[str, Page] = {}  # GET path → page (serve adds health and metrics)
        self.handlers: dict[str, Handler] = {}  # path → endpoint of any method (/budgets)
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._refuser = Refuser()
        self._lock = threading.Condition()
        self._connections: dict[socket.socket, bool] = {}  # socket → busy with a request
        self._server = _Server((host, port), self)
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="budgetscope-otlp-http", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}{TRACES_PATH}"

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop accepting, let in-flight requests finish (their commits included), close idle
        keep-alive connections. True when every request finished within `timeout`."""
        if self._thread.is_alive():
            self._server.shutdown()  # waits for serve_forever to return: started threads only
        self._server.server_close()
        deadline = time.monotonic() + timeout
        with self._lock:
            self.stopping = True
            for connection, busy in self._connections.items():
                if not busy:
                    _shutdown(connection)
            while any(self._connections.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
        return True

    # Connection bookkeeping, called by the handler threads.
    def _opened(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections[connection] = False
            if self.stopping:
                _shutdown(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.pop(connection, None)
            self._lock.notify_all()

    def _begin(self, connection: socket.socket) -> bool:
        with self._lock:
            if self.stopping:
                return False
            self._connections[connection] = True
            return True

    def _end(self, connection: socket.socket) -> None:
        with self._lock:
            if connection in self._connections:
                self._connections[connection] = False
            if self.stopping:
                _shutdown(connection)
            self._lock.notify_all()


def _shutdown(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RD)
