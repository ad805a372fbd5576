"""The OTLP/HTTP port's lifecycle (HttpReceiver): bind it, build its routes and its threads,
serve it on an event-loop thread of its own, and drain it on stop().

Tornado parses the framing (request heads, Content-Length, chunked bodies with strict hex
sizes, keep-alive) on one event-loop thread, so an idle or slow connection costs a socket and
no thread. On top of it:
- routes: path → Endpoint (http_routes.py); POST /v1/traces and POST /v1/logs are entries
  (otlp_endpoint.py), and the caller may hand more at construction (`budgetscope serve` hands
  the operator's pages, /budgets, /prices and /cli: budgetscope/server/);
- threads: a whole request is answered in a pool, exports in one (decode, then wait for the
  commit: they are answered only after it), pages in another, so that exports waiting on a
  busy writer never delay a health check; an endpoint with a bounded pool of its own
  (`Endpoint.pool`: serve's read API, /budgets) is answered there, so that it never takes an
  export's slot. Commits go through the single group-commit writer;
- the server and its connection limits: http_server.py; what is decided from a request's head
  alone: http_admission.py; one request from its head to its answer, its body read under the
  limits: http_exchange.py; an answer streamed from its worker thread as it is made:
  http_answer_stream.py; how an answer is spelled: http_wire.py; what they use of the
  receiver: http_port.py.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from tornado.ioloop import IOLoop
from tornado.netutil import bind_sockets

from ingest.receivers.auth import BearerToken, FailedTokens
from ingest.receivers.connection_guards import ConnectionTable, Lingering, ReceivingBytes
from ingest.receivers.counters import HTTP_REASONS
from ingest.receivers.host_check import HostPolicy, LoopbackHosts
from ingest.receivers.http_admission import BODY_METHODS
from ingest.receivers.http_routes import Endpoint, Head, Reply
from ingest.receivers.http_server import LimitedServer
from ingest.receivers.limits import Limits
from ingest.receivers.log_intake import LogIntake
from ingest.receivers.otlp_endpoint import LOGS_PATH, TRACES_PATH, OtlpExportEndpoint
from ingest.receivers.span_intake import SpanIntake
from store import joined

__all__ = ["HttpReceiver"]

_LOG = logging.getLogger(__name__)
# Listen backlog: a burst of exporters connecting at once queues in the kernel.
_BACKLOG = 1024
_PAGE_THREADS = 4


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
        self._server: LimitedServer | None = None
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
        self._server = LimitedServer(self)
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
        if head.method in BODY_METHODS and (endpoint is None or endpoint.otlp):
            self.traces.counters.refused(
                "http", head.peer, HTTP_REASONS.get(reply.status, str(reply.status)),
                reply.message)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_UNSPEC
