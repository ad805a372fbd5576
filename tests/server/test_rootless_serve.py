"""docs/conventions.md, a trace without its root, as serve runs it: the spans of a run whose root
never arrives (smolagents never ends the agent span of a run that raised) are exported by the real
OTLP exporter; the trace waits for the grace period, is then measured from its earliest span without
any new span arriving, /metrics counts it and the log says so; its root arriving later replaces that
run under the same id."""

from __future__ import annotations

import logging
import time
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from budgetscope.server.operations import OperatorPages
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner
from tests.support.convention_traces import call_traces, finished_spans

GRACE_SECONDS = 3.0  # longer than a turn's wait for commits (1 s)


def _runs(owner: DatabaseOwner, trace_id: str) -> list[tuple]:
    cursor = owner.cursor()
    try:
        return cursor.execute("SELECT run_id, root_missing FROM runs WHERE trace_id = ?",
                              [trace_id]).fetchall()
    finally:
        cursor.close()


def _until(predicate, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.slow
def test_serve_measures_a_rootless_trace_after_the_grace_period(
        tmp_path: Path, caplog) -> None:
    b, runs = call_traces()
    trace_id = b.trace_id(runs["rootless"])
    spans = [s for s in finished_spans(b, runs) if b.trace_id(s) == trace_id]
    root = [s for s in b.finished() if b.span_id(s) == b.span_id(runs["rootless"])]
    owner = DatabaseOwner(tmp_path / "served.duckdb")
    receivers = Receivers(owner, ReceiverConfig(
        http_port=0, grpc_port=0, root_grace_seconds=GRACE_SECONDS,
        routes=lambda parts: OperatorPages(parts.writer, parts.counters, parts.token,
                                           sources=[], cache_seconds=0).routes()), derive=True)
    receivers.start()
    caplog.set_level(logging.INFO, logger="store.derive_thread")
    try:
        exporter = OTLPSpanExporter(endpoint=receivers.http_endpoint)
        sent = time.monotonic()
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        _until(lambda: receivers.committer.awaiting_root == 1, 10)
        assert _runs(owner, trace_id) == []  # within the grace period it waits
        _until(lambda: bool(_runs(owner, trace_id)))
        assert time.monotonic() - sent >= GRACE_SECONDS
        assert _runs(owner, trace_id) == [(trace_id, True)]
        _until(lambda: receivers.committer.root_missing_runs == 1, 5)
        assert "root span never arrived" in caplog.text
        metrics = urllib.request.urlopen(
            receivers.http_endpoint.replace("/v1/traces", "/metrics"), timeout=10).read()
        assert b"budgetscope_runs_root_missing 1.0" in metrics
        assert exporter.export(root) == SpanExportResult.SUCCESS
        _until(lambda: _runs(owner, trace_id) == [(trace_id, False)])
        assert _runs(owner, trace_id) == [(trace_id, False)]
        exporter.shutdown()
    finally:
        receivers.stop(10)
        owner.close()
