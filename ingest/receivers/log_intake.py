"""OTLP logs on the receivers: an ExportLogsServiceRequest body → committed log records.

The logs counterpart of span_intake.py's trace path, and no more than that: the same decode slots,
group-commit writer, limits and acknowledgement (the answer goes out once the records are
committed), through `SpanIntake.commit`. The HTTP receiver maps `/v1/logs` here and the gRPC
receiver its LogsService/Export; a log record with exception.type and a span context becomes
that span's exception evidence once committed (store/write/sql/mark_pending_log_exceptions.sql).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from ingest.decode.log_decode import decode_logs_request, export_kind
from ingest.decode.log_flatten import flatten_logs_request
from ingest.decode.log_json import flatten_json_logs
from ingest.decode.otlp_json import NotOtlpJson
from ingest.decode.proto_decode import UndecodableMessage
from ingest.receivers.counters import ReceiverCounters
from ingest.receivers.span_intake import SpanIntake, Undecodable, summarise
from store import FlatBatch


@dataclass(frozen=True)
class AcceptedLogs:
    """Committed log records; rejected ones fill partial_success."""

    records: int
    without_span: int = 0  # of `records`: no span context (kept, counted)
    rejected_records: int = 0
    error_message: str = ""
    rejected_by_reason: dict[str, int] = field(default_factory=dict)

    def response(self) -> ExportLogsServiceResponse:
        response = ExportLogsServiceResponse()
        if self.rejected_records or self.error_message:
            response.partial_success.rejected_log_records = self.rejected_records
            response.partial_success.error_message = self.error_message
        return response

    def record(self, counters: ReceiverCounters, transport: str, peer: str) -> None:
        counters.answered_logs(transport, peer, self.records, self.without_span,
                               self.rejected_by_reason)


class LogIntake:
    """Turns logs bodies into committed records. Raises what SpanIntake.commit raises."""

    def __init__(self, traces: SpanIntake) -> None:
        self.traces = traces  # whose commit, limits and counters the logs share
        self.counters = traces.counters

    def export_protobuf(self, body: bytes, where: str,
                        inflate: Callable[[bytes], bytes] | None = None) -> AcceptedLogs:
        return self._accepted(self.traces.commit(body, where, inflate, decode_protobuf))

    def export_json(self, body: bytes, where: str,
                    inflate: Callable[[bytes], bytes] | None = None) -> AcceptedLogs:
        return self._accepted(self.traces.commit(body, where, inflate, decode_json))

    @staticmethod
    def _accepted(batch: FlatBatch) -> AcceptedLogs:
        by_reason: Counter[str] = Counter()
        for rejection in batch.rejections:
            by_reason[rejection.reason] += rejection.log_records
        return AcceptedLogs(batch.log_count, batch.logs_without_span, sum(by_reason.values()),
                            summarise(batch.rejections, logs=True), dict(by_reason))


def decode_protobuf(body: bytes, where: str) -> FlatBatch:
    if export_kind(body) == "traces":
        # Its spans would read as garbled log records: say where it belongs instead.
        raise Undecodable("this is an ExportTraceServiceRequest (spans): send it to /v1/traces "
                          "or the TraceService, not to /v1/logs")
    try:
        request, rejections = decode_logs_request(body, where)
    except UndecodableMessage as error:
        raise Undecodable(str(error)) from None
    batch = flatten_logs_request(request, where=where)
    batch.rejections[:0] = rejections
    return batch


def decode_json(body: bytes, where: str) -> FlatBatch:
    try:
        # surrogateescape: a record with invalid UTF-8 is refused alone (see span_intake.py)
        document = json.loads(body.decode("utf-8", "surrogateescape")) if body else {}
        return flatten_json_logs(document, where=where)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, NotOtlpJson
        what = "not OTLP JSON logs" if isinstance(error, NotOtlpJson) else "invalid JSON"
        raise Undecodable(f"{what}: {error}"[:500]) from None
