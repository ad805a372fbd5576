"""OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export` and
`opentelemetry.proto.collector.logs.v1.LogsService/Export`.

The methods are registered with a generic handler that receives the raw request bytes instead of
through `add_TraceServiceServicer_to_server`: grpc's generated deserializer would turn one
corrupt span into a failed call (INTERNAL), while `decode_request` salvages the other spans and
reports the bad one in partial_success, as the HTTP receiver does.

Status codes (OTLP specification, OTLP/gRPC): INVALID_ARGUMENT for a body that is not a request,
UNAUTHENTICATED without the bearer token, RESOURCE_EXHAUSTED over the size limit (grpc enforces
`grpc.max_receive_message_length` on the decompressed message), UNAVAILABLE with RetryInfo when
the writer is behind, a write failed or more than `max_requests` calls are in progress
(exporters retry it after the delay; see status.py). gzip message compression is handled by grpc.

Every refusal for load is UNAVAILABLE with RetryInfo, at any concurrency. The server is grpc's
asyncio one, on an event loop of its own thread: a call is a coroutine, so however many arrive
at once each is admitted or refused by our own count, never by grpc's `maximum_concurrent_rpcs`
(not set). The threaded server needs that limit, since each call beyond its threads would
queue without bound; it answered RESOURCE_EXHAUSTED without RetryInfo, which OTLP clients other
than the Python SDK drop: 300 concurrent exports on one channel got 166 of those. An admitted
call decodes and waits for its commit in a pool of `max_requests` threads.

The methods are registered as client-streaming although exporters call them unary (the wire is
the same): the message is read only once the call is admitted, so a refused call never has
its body (up to the size limit) read into memory; grpc's flow control holds back the rest.

The port is bound without SO_REUSEPORT (grpc sets it by default): with it a second server on
the same port started too, and the kernel split the exports between the two database files.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest.receivers.auth import BearerToken, FailedTokens, grpc_client
from ingest.receivers.limits import Limits
from ingest.receivers.log_intake import AcceptedLogs, LogIntake
from ingest.receivers.span_intake import Accepted, SpanIntake, Undecodable, retry_after_seconds
from ingest.receivers.status import (
    RETRY_INFO_KEY,
    STATUS_DETAILS_KEY,
    UNAVAILABLE,
    retry_info,
    status_protobuf,
)
from store import Closed, Overloaded, WriteFailed, joined

_LOG = logging.getLogger(__name__)
SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
_RETRY_AFTER_BUSY = 1
_START_SECONDS = 30.0
Export = Callable[[bytes, str], Accepted | AcceptedLogs]


def _retryable(message: str, retry_after: int) -> tuple[tuple[str, bytes], ...]:
    """UNAVAILABLE's trailers (OTLP/gRPC Throttling): a google.rpc.Status with a RetryInfo
    detail in the standard grpc-status-details-bin, and the RetryInfo alone under the key the
    OTel Python exporter reads."""
    return ((STATUS_DETAILS_KEY, status_protobuf(UNAVAILABLE, message, retry_after)),
            (RETRY_INFO_KEY, retry_info(retry_after)))


def _bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class GrpcReceiver:
    """grpc's asyncio server with the TraceService and LogsService, on an event loop in a
    thread of its own (store/lifecycle.py's shape): `stop()` lets in-flight calls finish, then
    the thread ends. The thread runs from construction, since grpc.aio binds a server on its
    running loop and the port is known once built; `start()` starts serving."""

    def __init__(self, traces: SpanIntake, host: str, port: int, *, token: BearerToken,
                 limits: Limits, failed_tokens: FailedTokens | None = None) -> None:
        self.traces = traces
        self.token = token
        self.limits = limits
        # Wrong tokens per client address (auth.py): this port's own count.
        self.failed_tokens = failed_tokens if failed_tokens is not None else FailedTokens()
        self.logs = LogIntake(traces)
        self.host = host
        self.in_progress = 0  # admitted calls; read and written on the loop's thread only
        self._stop_asked = False
        self._workers = ThreadPoolExecutor(limits.max_requests,
                                           thread_name_prefix="budgetscope-otlp-grpc")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="budgetscope-otlp-grpc-loop", daemon=True)
        self._thread.start()
        try:
            # grpc.aio binds a server to the loop it is made on.
            self._server, self.port = asyncio.run_coroutine_threadsafe(
                self._bind(_bind_address(host, port)), self._loop).result(_START_SECONDS)
        except BaseException:
            self._close_loop()
            raise

    async def _bind(self, address: str) -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", self.limits.max_body_bytes),
            # Clients that stop reading are dropped rather than holding a call open.
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.so_reuseport", 0),  # a taken port fails here instead of being shared
            # A flood of connections that never finish their handshake holds at most this
            # many descriptors, each for at most the handshake timeout (limits.py). grpc's
            # own accept loop backs off a second on EMFILE and logs once a second.
            ("grpc.max_allowed_incoming_connections", self.limits.max_grpc_connections),
            ("grpc.server_handshake_timeout_ms", int(self.limits.handshake_timeout * 1000)),
        ])
        server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler(SERVICE, {"Export": self._method(
                self.traces.export_protobuf, ExportTraceServiceResponse)}),
            grpc.method_handlers_generic_handler(LOGS_SERVICE, {"Export": self._method(
                self.logs.export_protobuf, ExportLogsServiceResponse)}),
        ))
        try:
            bound = server.add_insecure_port(address)
        except RuntimeError:  # grpc's way of saying the port is taken
            bound = 0
        if not bound:
            raise OSError(f"cannot listen for OTLP/gRPC on {address} (the port is in use, "
                          "perhaps by another budgetscope serve; choose another "
                          "--otlp-grpc-port)")
        return server, bound

    def _method(self, export: Export, response: type) -> grpc.RpcMethodHandler:
        async def call(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
                       ) -> object:
            return (await self._call(requests, context, export)).response()

        return grpc.stream_unary_rpc_method_handler(
            call,
            request_deserializer=None,  # raw bytes: decode_request salvages per span
            response_serializer=response.SerializeToString,
        )

    @property
    def endpoint(self) -> str:
        return _bind_address(self.host, self.port)

    @property
    def name(self) -> str:
        return self._thread.name

    def start(self) -> None:
        asyncio.run_coroutine_threadsafe(self._server.start(), self._loop).result(
            _START_SECONDS)

    def stop(self, grace: float = 30.0) -> None:
        """Refuse new calls at once; in-flight ones (and their commits) may finish within
        `grace` seconds, when grpc cancels the stragglers; then the thread ends."""
        if self._stop_asked or not self._thread.is_alive():
            return
        self._stop_asked = True
        asyncio.run_coroutine_threadsafe(self._server.stop(grace), self._loop
                                         ).add_done_callback(lambda _: self._close_loop())

    def join(self, timeout: float | None = None) -> bool:
        return joined(self._thread, timeout)

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        joined(self._thread, 5)  # from the loop's own thread: no wait
        self._workers.shutdown(wait=False, cancel_futures=True)

    async def _call(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext,
                    export: Export) -> Accepted | AcceptedLogs:
        """Authenticate, admit, read the one message, then export in a worker thread; each
        refusal aborts the call with its OTLP status."""
        metadata = {key: value for key, value in context.invocation_metadata() or ()
                    if isinstance(value, str)}
        counters = self.traces.counters
        authorization = metadata.get("authorization")
        client = grpc_client(context.peer())
        if self.token.required and authorization is not None:
            wait = self.failed_tokens.wait(client)
            if wait and not self.token.allows(authorization):  # the right one goes through
                seconds = math.ceil(wait)
                message = (f"too many wrong tokens from {client}; the next may be tried in "
                           f"{seconds} s")
                counters.refused("grpc", context.peer(), "throttled", message)
                await context.abort(grpc.StatusCode.UNAVAILABLE, message,
                                    _retryable(message, seconds))
        if not self.token.allows(authorization):
            if authorization is not None:
                self.failed_tokens.failed(client)
            counters.refused("grpc", context.peer(), "unauthenticated", "no bearer token")
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        if self.in_progress >= self.limits.max_requests:
            message = (f"{self.limits.max_requests} calls in progress (the most at once); "
                       "retry")
            counters.refused("grpc", context.peer(), "unavailable", message)
            await context.abort(grpc.StatusCode.UNAVAILABLE, message,
                                _retryable(message, _RETRY_AFTER_BUSY))
        self.in_progress += 1
        try:
            body = await self._one_message(requests, context)
            loop = asyncio.get_running_loop()
            try:
                accepted = await loop.run_in_executor(self._workers, export, body, "")
            except Undecodable as error:
                counters.refused("grpc", context.peer(), "undecodable", str(error))
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            except (Overloaded, Closed, WriteFailed) as error:
                counters.refused("grpc", context.peer(), "unavailable", str(error))
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(error),
                                    _retryable(str(error), retry_after_seconds(error)))
            except RuntimeError as error:  # the workers are shut down: the server is stopping
                message = f"server is shutting down ({error})"
                counters.refused("grpc", context.peer(), "unavailable", message)
                await context.abort(grpc.StatusCode.UNAVAILABLE, message,
                                    _retryable(message, _RETRY_AFTER_BUSY))
            accepted.record(counters, "grpc", context.peer())
            return accepted
        finally:
            self.in_progress -= 1

    async def _one_message(self, requests: AsyncIterator[bytes],
                           context: grpc.aio.ServicerContext) -> bytes:
        """The call's request (exporters send exactly one), within the body timeout: a client
        that opens a call and sends nothing, or a byte at a time, gives its slot back then."""
        seconds = self.limits.body_timeout
        try:
            body = await asyncio.wait_for(anext(aiter(requests), None), seconds)
        except TimeoutError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "could not read the request: "
                                f"it took longer than {seconds:g} s to arrive")
        if body is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
        return body
