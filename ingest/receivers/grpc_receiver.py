"""OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export` and
`opentelemetry.proto.collector.logs.v1.LogsService/Export`.

The method is registered with a generic handler that receives the raw request bytes instead of
through `add_TraceServiceServicer_to_server`: grpc's generated deserializer would turn one
corrupt span into a failed call (INTERNAL), while `decode_request` salvages the other spans and
reports the bad one in partial_success, as the HTTP receiver does.

Status codes (OTLP specification, OTLP/gRPC): INVALID_ARGUMENT for a body that is not a request,
UNAUTHENTICATED without the bearer token, RESOURCE_EXHAUSTED over the size limit (grpc enforces
`grpc.max_receive_message_length` on the decompressed message), UNAVAILABLE with RetryInfo when
the writer is behind, a write failed or more than `max_requests` calls are in progress
(exporters retry it after the delay; see status.py). gzip message compression is handled by grpc.

The port is bound without SO_REUSEPORT (grpc sets it by default): with it a second server on
the same port started too, and the kernel split the exports between the two database files.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest.receivers.auth import BearerToken
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
from store.group_commit import Closed, Overloaded, WriteFailed

_LOG = logging.getLogger(__name__)
SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
# Threads beyond `max_requests` that answer the calls refused over it at once. grpc's own
# maximum_concurrent_rpcs answers RESOURCE_EXHAUSTED without RetryInfo, which OTLP clients
# other than the Python SDK drop: it is set above ours, only as a backstop. Decoding holds the
# GIL, and the exporter's decode slots bound it whatever the number of threads.
_REFUSING_WORKERS = 16
_RETRY_AFTER_BUSY = 1


class RetryableStatus(grpc.Status):
    """UNAVAILABLE with a google.rpc.RetryInfo detail (OTLP/gRPC Throttling): in the standard
    grpc-status-details-bin trailer, and alone under the key the OTel Python exporter reads."""

    def __init__(self, message: str, retry_after: int) -> None:
        self.code = grpc.StatusCode.UNAVAILABLE
        self.details = message
        self.trailing_metadata = (
            (STATUS_DETAILS_KEY, status_protobuf(UNAVAILABLE, message, retry_after)),
            (RETRY_INFO_KEY, retry_info(retry_after)),
        )


def _bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class GrpcReceiver:
    """A grpc server with the TraceService; `stop()` lets in-flight calls finish."""

    def __init__(self, exporter: SpanIntake, host: str, port: int, *, token: BearerToken,
                 limits: Limits) -> None:
        self.exporter = exporter
        self.token = token
        self.limits = limits
        self._calls = threading.BoundedSemaphore(limits.max_requests)
        threads = limits.max_requests + _REFUSING_WORKERS
        self._server = grpc.server(
            # As many threads as calls admitted, so that no call waits for a thread: a refusal
            # is answered at once.
            ThreadPoolExecutor(threads, thread_name_prefix="budgetscope-otlp-grpc"),
            options=[
                ("grpc.max_receive_message_length", limits.max_body_bytes),
                # Clients that stop reading are dropped rather than holding a call open.
                ("grpc.keepalive_time_ms", 60_000),
                ("grpc.so_reuseport", 0),  # a taken port fails here instead of being shared
            ],
            maximum_concurrent_rpcs=threads,
        )
        handler = grpc.method_handlers_generic_handler(SERVICE, {
            "Export": grpc.unary_unary_rpc_method_handler(
                self._export,
                request_deserializer=None,  # raw bytes: decode_request salvages per span
                response_serializer=ExportTraceServiceResponse.SerializeToString,
            ),
        })
        self.logs_exporter = LogIntake(exporter)
        logs_handler = grpc.method_handlers_generic_handler(LOGS_SERVICE, {
            "Export": grpc.unary_unary_rpc_method_handler(
                self._export_logs,
                request_deserializer=None,  # raw bytes: decode_logs_request salvages per record
                response_serializer=ExportLogsServiceResponse.SerializeToString,
            ),
        })
        self._server.add_generic_rpc_handlers((handler, logs_handler))
        self.host = host
        try:
            self.port = self._server.add_insecure_port(_bind_address(host, port))
        except RuntimeError:  # grpc's way of saying the port is taken
            self.port = 0
        if not self.port:
            raise OSError(f"cannot listen for OTLP/gRPC on {_bind_address(host, port)} (the "
                          "port is in use, perhaps by another budgetscope serve; choose "
                          "another --otlp-grpc-port)")

    @property
    def endpoint(self) -> str:
        return _bind_address(self.host, self.port)

    def start(self) -> None:
        self._server.start()

    def begin_stop(self, timeout: float = 30.0) -> threading.Event:
        """Refuse new calls at once; the event is set when in-flight ones (and their commits)
        have finished, or after `timeout` when grpc cancels the stragglers."""
        return self._server.stop(grace=timeout)

    def _export(self, body: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        accepted = self._call(body, context, self.exporter.export_protobuf)
        return accepted.response()  # type: ignore[return-value]

    def _export_logs(self, body: bytes, context: grpc.ServicerContext
                     ) -> ExportLogsServiceResponse:
        accepted = self._call(body, context, self.logs_exporter.export_protobuf)
        return accepted.response()  # type: ignore[return-value]

    def _call(self, body: bytes, context: grpc.ServicerContext,
              export: Callable[[bytes, str], Accepted | AcceptedLogs]) -> Accepted | AcceptedLogs:
        """Authenticate, then export; refusals abort the call with their OTLP status."""
        metadata = {key: value for key, value in context.invocation_metadata()
                    if isinstance(value, str)}
        counters = self.exporter.counters
        if not self.token.allows(metadata.get("authorization")):
            counters.refused("grpc", context.peer(), "unauthenticated", "no bearer token")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        if not self._calls.acquire(blocking=False):
            message = (f"{self.limits.max_requests} calls in progress (the most at once); "
                       "retry")
            counters.refused("grpc", context.peer(), "unavailable", message)
            context.abort_with_status(RetryableStatus(message, _RETRY_AFTER_BUSY))
        try:
            accepted = export(body, "")
        except Undecodable as error:
            counters.refused("grpc", context.peer(), "undecodable", str(error))
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except (Overloaded, Closed, WriteFailed) as error:
            counters.refused("grpc", context.peer(), "unavailable", str(error))
            context.abort_with_status(
                RetryableStatus(str(error), retry_after_seconds(error)))
        else:
            accepted.record(counters, "grpc", context.peer())
            return accepted
        finally:
            self._calls.release()
        raise AssertionError("unreachable: context.abort raises")
