"""Exceptions recorded as OTLP log records (docs/conventions.md, docs/metrics.md §3 rule 4): a log
record with exception.type and a span context is an exception event of that span, so it changes the
span's class, whichever arrives first, over the real receivers and in files."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.files.loader import load_files
from ingest.receivers.limits import Limits
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner, connect
from tests.support.otlp_files import request as spans_request
from tests.support.otlp_logs import RunWithLogs, logs_request, run_with_logs

CLASSES = "SELECT span_id, class FROM steps WHERE trace_id = ?"


def classes(con, run: RunWithLogs) -> dict[str, str]:  # type: ignore[no-untyped-def]
    rows = dict(con.execute(CLASSES, [run.trace_id]).fetchall())
    return {"tool": rows.get(run.tool_span_id), "model": rows.get(run.model_span_id)}


EXPECTED = {"tool": "client_timeout",  # tests.support.otlp_logs.ReadTimeout: a timeout, ours
            "model": "upstream_error"}  # ConnectionResetError (short name): theirs
WITHOUT_LOGS = {"tool": "error", "model": "error"}  # status ERROR and nothing else


def _write(path: Path, message) -> Path:  # type: ignore[no-untyped-def]
    path.write_bytes(message.SerializeToString())
    return path


@pytest.mark.slow
def test_exception_log_records_class_their_spans_in_files(tmp_path: Path) -> None:
    run = run_with_logs()
    spans = _write(tmp_path / "spans.pb", spans_request(list(run.spans)))
    logs = _write(tmp_path / "logs.pb", logs_request(run.logs))
    with connect(tmp_path / "spans-only.duckdb") as con:
        load_files(con, [spans], progress=False, derive=True)
        assert classes(con, run) == WITHOUT_LOGS
        # the records come later, in another load: the trace is derived again
        summary = load_files(con, [logs], progress=False, derive=True)
        assert summary.logs_loaded == 4 and summary.logs_span_missing == 0
        assert classes(con, run) == EXPECTED
    with connect(tmp_path / "logs-first.duckdb") as con:
        summary = load_files(con, [logs], progress=False, derive=True)
        assert summary.logs_span_missing == 3  # kept: their spans come next
        load_files(con, [spans], progress=False, derive=True)
        assert classes(con, run) == EXPECTED


def test_a_record_pointing_at_a_span_never_received_changes_nothing(tmp_path: Path) -> None:
    run = run_with_logs()
    request = logs_request(run.logs)
    for resource in request.resource_logs:
        for scope in resource.scope_logs:
            for record in scope.log_records:
                if record.span_id:
                    record.span_id = b"\x00" * 7 + b"\x01"  # a span of the trace never sent
    spans = _write(tmp_path / "spans.pb", spans_request(list(run.spans)))
    logs = _write(tmp_path / "logs.pb", request)
    with connect(tmp_path / "db.duckdb") as con:
        summary = load_files(con, [spans, logs], progress=False, derive=True)
        assert not summary.rejections
        assert summary.logs_loaded == 4 and summary.logs_span_missing == 3
        assert classes(con, run) == WITHOUT_LOGS


@contextmanager
def deriving_receivers(folder: Path) -> Iterator[tuple[Receivers, DatabaseOwner]]:
    """The receivers as serve runs them: the derivation beside the writer."""
    owner = DatabaseOwner(folder / "serve.duckdb")
    config = ReceiverConfig(host="127.0.0.1", http_port=0, grpc_port=0,
                            limits=Limits(max_body_bytes=1 << 20))
    receivers = Receivers(owner, config, derive=True)
    receivers.start()
    try:
        yield receivers, owner
    finally:
        receivers.stop(10)
        owner.close()


def _wait_for(owner: DatabaseOwner, run: RunWithLogs, wanted: dict[str, str]) -> dict[str, str]:
    deadline = time.monotonic() + 30
    while True:
        cursor = owner.cursor()
        try:
            got = classes(cursor, run)
        finally:
            cursor.close()
        if got == wanted or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


@pytest.mark.slow
def test_late_log_records_over_http_rederive_the_trace(tmp_path: Path) -> None:
    run = run_with_logs()
    with deriving_receivers(tmp_path) as (receivers, owner):
        http = receivers.http_endpoint
        spans = OTLPSpanExporter(endpoint=http, timeout=10)
        assert spans.export(run.spans) is SpanExportResult.SUCCESS
        assert _wait_for(owner, run, WITHOUT_LOGS) == WITHOUT_LOGS
        logs = OTLPLogExporter(endpoint=http.replace("/v1/traces", "/v1/logs"), timeout=10)
        assert logs.export(run.logs) is LogRecordExportResult.SUCCESS
        assert _wait_for(owner, run, EXPECTED) == EXPECTED
        spans.shutdown()
        logs.shutdown()


@pytest.mark.slow
def test_log_records_before_their_spans_over_grpc(tmp_path: Path) -> None:
    run = run_with_logs()
    with deriving_receivers(tmp_path) as (receivers, owner):
        target = receivers.grpc_endpoint
        logs = GrpcLogExporter(endpoint=target, insecure=True, timeout=10)
        assert logs.export(run.logs) is LogRecordExportResult.SUCCESS
        spans = GrpcSpanExporter(endpoint=target, insecure=True, timeout=10)
        assert spans.export(run.spans) is SpanExportResult.SUCCESS
        assert _wait_for(owner, run, EXPECTED) == EXPECTED
        spans.shutdown()
        logs.shutdown()
