"""Log records made by the real OpenTelemetry SDK (its Logger, with and without a span
context, an exception recorded through `emit(exception=...)` and through the logging bridge),
beside the spans of the same run, encoded by its own OTLP encoders. Shared by the logs tests."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode


class ReadTimeout(Exception):
    """Stands for httpx.ReadTimeout: what matters to docs/metrics.md §3 is its type's name."""


@dataclass
class RunWithLogs:
    spans: Sequence[ReadableSpan]
    logs: Sequence[ReadableLogRecord]
    trace_id: str
    tool_span_id: str  # the tool step whose only failure evidence is an exception log record
    model_span_id: str  # a model step with an exception logged through Python logging


def run_with_logs(service: str = "logs-agent") -> RunWithLogs:
    """One run: a tool call that fails (span status ERROR, no exception event on the span: the
    SDK records the exception as a log record instead), a model call whose error is logged by
    Python's logging bridge, an info record in the run, and a record outside any span."""
    resource = Resource.create({"service.name": service})
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = tracer_provider.get_tracer("budgetscope.tests")
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    logger = logger_provider.get_logger("budgetscope.tests")
    bridge = logging.getLogger(f"budgetscope.tests.bridge.{id(logs)}")
    bridge.propagate = False
    with warnings.catch_warnings():  # the SDK's own bridge, deprecated for a separate package
        warnings.simplefilter("ignore", DeprecationWarning)
        bridge.addHandler(LoggingHandler(logger_provider=logger_provider))
    with tracer.start_as_current_span("run", attributes={"budget.total_ms": 60_000}) as root:
        logger.emit(body="run started", severity_number=SeverityNumber.INFO,
                    severity_text="INFO")
        with tracer.start_as_current_span(
                "execute_tool fetch_report", kind=SpanKind.CLIENT,
                attributes={"gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": "fetch_report"},
                record_exception=False, set_status_on_exception=False) as tool:
            try:
                raise ReadTimeout("read timed out after 5 s")
            except ReadTimeout as error:
                logger.emit(body="tool call failed", severity_number=SeverityNumber.ERROR,
                            severity_text="ERROR", exception=error)
                tool.set_status(Status(StatusCode.ERROR))
        with tracer.start_as_current_span(
                "chat gpt-x", kind=SpanKind.CLIENT,
                attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x"},
                record_exception=False, set_status_on_exception=False) as model:
            try:
                raise ConnectionResetError("connection reset by peer")
            except ConnectionResetError:
                bridge.exception("model call failed")
            model.set_status(Status(StatusCode.ERROR))
        trace_id = format(root.get_span_context().trace_id, "032x")
        tool_id = format(tool.get_span_context().span_id, "016x")
        model_id = format(model.get_span_context().span_id, "016x")
    logger.emit(body="outside any span", severity_number=SeverityNumber.WARN)
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return RunWithLogs(spans.get_finished_spans(), logs.get_finished_logs(), trace_id, tool_id,
                       model_id)


def logs_request(records: Sequence[ReadableLogRecord]) -> ExportLogsServiceRequest:
    return encode_logs(records)
