"""`budgetscope serve` as a real process with the operating options: JSON log lines on
stderr (start-up without the token, each rejection with reason and peer, retention, shutdown),
health and metrics on the OTLP/HTTP port, and --retention-days removing old traces in the
background while it serves."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.support.ops_traces import ops_runs
from tests.support.prometheus_parser import parse
from tests.support.receivers import raw_request
from tests.support.serve import start_serve, stop, stored

TOKEN = "s3cret-token-value"
MINUTE_NS = 60 * 10**9


def fetch(url: str, token: str | None = None, body: bytes | None = None,
          content_type: str = "application/x-protobuf") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if body is not None:
        headers["Content-Type"] = content_type
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers),
                                    timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.slow
def test_serve_logs_json_serves_health_and_metrics_and_applies_retention(tmp_path: Path
                                                                         ) -> None:
    db = tmp_path / "ops.duckdb"
    process, announced = start_serve(db, "--no-ui", "--log-format", "json",
                                     "--retention-days", "30", "--retention-interval", "1s",
                                     "--metrics-window", "2h", "--metrics-cache-seconds", "0",
                                     token=TOKEN)
    base = announced["otlp_http"].removesuffix("/v1/traces")
    try:
        assert fetch(base + "/healthz") == (200, "ok\n")
        assert fetch(base + "/readyz") == (200, "ready\n")
        assert fetch(base + "/metrics")[0] == 401
        # 6 spans of one trace from 2025 (raw_request's timestamps): older than 30 days.
        old = raw_request(6)
        assert fetch(announced["otlp_http"], TOKEN, old.SerializeToString())[0] == 200
        exporter = OTLPSpanExporter(endpoint=announced["otlp_http"], timeout=10,
                                    headers={"Authorization": f"Bearer {TOKEN}"})
        assert exporter.export(ops_runs(time.time_ns() - 10 * MINUTE_NS)) is (
            SpanExportResult.SUCCESS)
        exporter.shutdown()
        assert fetch(announced["otlp_http"], TOKEN, b"{", "application/json")[0] == 400
        assert fetch(announced["otlp_http"], None, raw_request(2).SerializeToString())[0] == 401

        deadline = time.monotonic() + 60
        while True:
            status, text = fetch(base + "/metrics", TOKEN)
            assert status == 200, text
            metrics = parse(text)
            removed = metrics["budgetscope_retention_spans_removed_total"].value()
            runs = metrics["budgetscope_recent_runs"].value(window="2h")
            if (removed, runs) == (6, 3) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (removed, runs) == (6, 3)
        assert metrics["budgetscope_recent_exhaustion_rate"].value(window="2h") == 0.5
        assert metrics["budgetscope_spans_accepted_total"].value(transport="http") == 16
    finally:
        code, out, err = stop(process)
    assert code == 0, err
    assert stored(db) == 10  # the new runs; the old trace is gone
    assert TOKEN not in out and TOKEN not in err

    events = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert all(isinstance(event, dict) for event in events)
    for event in events:
        assert {"ts", "level", "logger", "event", "message"} <= set(event), event
    start = events[0]
    assert start["event"] == "start" and start["token_required"] is True
    assert start["otlp_http"] == announced["otlp_http"] and start["db"] == str(db)
    assert start["retention_days"] == 30 and start["metrics_window"] == "2h"
    rejected = [(e["reason"], e["peer"], e["requests"]) for e in events
                if e["event"] == "request_rejected"]
    # /metrics without the token is refused too, but it is not an export: not logged.
    assert sorted(rejected) == [("unauthenticated", "127.0.0.1", 1),
                                ("undecodable", "127.0.0.1", 1)]
    retention = [e for e in events if e["event"] == "retention"]
    assert sum(e["traces"] for e in retention) == 1
    assert sum(e["spans"] for e in retention) == 6
    assert [e["event"] for e in events[-2:]] == ["stopping", "stop"]
    assert events[-1]["spans_stored"] == 16 and events[-1]["drained"] is True
