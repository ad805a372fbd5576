"""OTLP logs (docs/conventions.md): `POST /v1/logs`, the gRPC LogsService and resourceLogs in
files, with the real OpenTelemetry SDK's log exporters against our receivers on 127.0.0.1."""

from __future__ import annotations

import gzip
import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from budgetscope.server.operations import OperatorPages
from ingest.decode.log_decode import looks_like_logs
from ingest.files.loader import load_files
from ingest.receivers.auth import BearerToken
from store import connect
from tests.support.otlp_files import length_prefixed, otlp_json
from tests.support.otlp_files import request as spans_request
from tests.support.otlp_logs import logs_request, run_with_logs
from tests.support.prometheus_parser import parse
from tests.support.receivers import Running, running_receivers

LOGS = "SELECT count(*) FROM log_records"


@pytest.fixture
def server(tmp_path: Path):
    with running_receivers(tmp_path) as running:
        yield running


def logs_url(running: Running) -> str:
    return running.http_url.replace("/v1/traces", "/v1/logs")


def post(running: Running, path: str, body: bytes, content_type: str,
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    url = urlsplit(running.http_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.request("POST", path, body=body,
                           headers={"Content-Type": content_type, **(headers or {})})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def metrics(running: Running) -> dict:
    pages = OperatorPages(running.receivers.committer, running.receivers.counters,
                          BearerToken(None))
    status, _, body, _ = pages.metrics(None)
    assert status == 200
    return parse(body.decode())


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_sdk_http_log_exporter_stores_records_once_even_when_resent(server: Running,
                                                                     compression) -> None:
    run = run_with_logs()
    spans = OTLPSpanExporter(endpoint=server.http_url, compression=compression, timeout=10)
    assert spans.export(run.spans) is SpanExportResult.SUCCESS
    exporter = OTLPLogExporter(endpoint=logs_url(server), compression=compression, timeout=10)
    assert exporter.export(run.logs) is LogRecordExportResult.SUCCESS
    assert server.count(LOGS) == 4  # answered after the commit: already visible
    assert exporter.export(run.logs) is LogRecordExportResult.SUCCESS  # an exporter retry
    assert server.count(LOGS) == 4
    assert server.count(
        "SELECT count(*) FROM log_records"
        " WHERE exception_type = 'tests.support.otlp_logs.ReadTimeout'"
        f" AND trace_id = '{run.trace_id}' AND span_id = '{run.tool_span_id}'") == 1
    assert server.count("SELECT count(*) FROM log_records WHERE span_id IS NULL "
                        "AND body ->> '$' = 'outside any span' AND severity_number = 13") == 1
    assert server.count("SELECT count(*) FROM log_records WHERE service_name = 'logs-agent'") == 4
    figures = metrics(server)
    assert figures["budgetscope_log_records_accepted_total"].value(transport="http") == 8
    assert figures["budgetscope_log_records_without_span_total"].value(transport="http") == 2
    assert figures["budgetscope_log_records_stored_total"].value() == 4
    assert figures["budgetscope_log_records_span_missing_total"].value() == 0
    exporter.shutdown()
    spans.shutdown()


def test_sdk_grpc_log_exporter_with_gzip(server: Running) -> None:
    from grpc import Compression as GrpcCompression

    run = run_with_logs()
    spans = GrpcSpanExporter(endpoint=server.grpc_target, insecure=True, timeout=10)
    assert spans.export(run.spans) is SpanExportResult.SUCCESS
    exporter = GrpcLogExporter(endpoint=server.grpc_target, insecure=True, timeout=10,
                               compression=GrpcCompression.Gzip)
    assert exporter.export(run.logs) is LogRecordExportResult.SUCCESS
    assert exporter.export(run.logs) is LogRecordExportResult.SUCCESS
    assert server.count(LOGS) == 4
    figures = metrics(server)
    assert figures["budgetscope_log_records_accepted_total"].value(transport="grpc") == 8
    exporter.shutdown()
    spans.shutdown()


def test_logs_need_the_bearer_token(tmp_path: Path) -> None:
    run = run_with_logs()
    with running_receivers(tmp_path, token="s3cret") as running:
        anonymous = OTLPLogExporter(endpoint=logs_url(running), timeout=5)
        assert anonymous.export(run.logs) is LogRecordExportResult.FAILURE
        grpc_anonymous = GrpcLogExporter(endpoint=running.grpc_target, insecure=True, timeout=5)
        assert grpc_anonymous.export(run.logs) is LogRecordExportResult.FAILURE
        assert running.count(LOGS) == 0
        allowed = OTLPLogExporter(endpoint=logs_url(running), timeout=5,
                                  headers={"Authorization": "Bearer s3cret"})
        assert allowed.export(run.logs) is LogRecordExportResult.SUCCESS
        assert running.count(LOGS) == 4
        for exporter in (anonymous, grpc_anonymous, allowed):
            exporter.shutdown()


def _json_document(run_trace_id: str) -> dict:
    """OTLP JSON as a Collector would post it: one good record, one pointing at a span never
    received, one without context, and three malformed ones (base64 id, bad severity, no
    time)."""
    def record(**fields: object) -> dict:
        return {"timeUnixNano": "1795000000000000000", "severityNumber": 9,
                "body": {"stringValue": "x"}, **fields}
    return {"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": "json-client"}}]},
        "scopeLogs": [{"scope": {"name": "raw"}, "logRecords": [
            record(traceId=run_trace_id, spanId="00000000000000aa",
                   severityNumber="SEVERITY_NUMBER_ERROR",
                   attributes=[{"key": "exception.type",
                                "value": {"stringValue": "RateLimitError"}}]),
            record(body={"kvlistValue": {"values": [{"key": "k",
                                                     "value": {"intValue": "3"}}]}}),
            record(traceId="W4738x2Z4p4EJw+RAB0TOw==", spanId="00000000000000ab"),
            record(severityNumber=99),
            {"body": {"stringValue": "no time"}},
        ]}]}]}


def test_json_logs_partial_success_counts_bad_and_unmatched_records(server: Running) -> None:
    document = _json_document("0af7651916cd43dd8448eb211c80319c")
    body = gzip.compress(json.dumps(document).encode())
    status, answer = post(server, "/v1/logs", body, "application/json",
                          {"Content-Encoding": "gzip"})
    assert status == 200, answer
    partial = json.loads(answer)["partialSuccess"]
    assert partial["rejectedLogRecords"] == "3"
    assert "bad_log_record ×3" in partial["errorMessage"]
    assert "looks base64-encoded" in partial["errorMessage"]
    assert server.count(LOGS) == 2
    assert server.count("SELECT count(*) FROM log_records WHERE body ->> '$.k' = '3'") == 1
    figures = metrics(server)
    rejected = figures["budgetscope_log_records_rejected_total"]
    assert rejected.value(reason="bad_log_record", transport="http") == 3
    assert figures["budgetscope_log_records_received_total"].value(transport="http") == 5
    assert figures["budgetscope_log_records_without_span_total"].value(transport="http") == 1
    # the record whose span never came is kept, and counted
    assert figures["budgetscope_log_records_span_missing_total"].value() == 1


def test_undecodable_logs_body_is_refused_whole(server: Running) -> None:
    status, answer = post(server, "/v1/logs", b"\xff\xff\xff", "application/x-protobuf")
    assert status == 400
    status, answer = post(server, "/v1/logs", b'{"resourceSpans": []}', "application/json")
    assert status == 400 and b"resourceLogs" in answer
    traces = spans_request(list(run_with_logs().spans)).SerializeToString()
    status, answer = post(server, "/v1/logs", traces, "application/x-protobuf")
    assert status == 400 and b"send it to /v1/traces" in answer
    status, answer = post(server, "/v1/metrics", b"", "application/x-protobuf")
    assert status == 404 and b"/v1/logs" in answer
    assert server.count(LOGS) == 0


def test_protobuf_partial_success_over_http(server: Running) -> None:
    run = run_with_logs()
    request = logs_request(run.logs)
    request.resource_logs[0].scope_logs[0].log_records[0].span_id = b"\x01\x02\x03"
    status, answer = post(server, "/v1/logs", request.SerializeToString(),
                          "application/x-protobuf")
    assert status == 200
    response = ExportLogsServiceResponse.FromString(answer)
    assert response.partial_success.rejected_log_records == 1
    assert "span_id is 3 bytes" in response.partial_success.error_message
    assert server.count(LOGS) == 3


def test_logs_and_traces_tell_apart_in_protobuf() -> None:
    run = run_with_logs()
    assert looks_like_logs(logs_request(run.logs).SerializeToString())
    assert not looks_like_logs(spans_request(list(run.spans)).SerializeToString())


@pytest.mark.slow
def test_files_with_resource_logs_in_every_form(tmp_path: Path) -> None:
    run = run_with_logs()
    traces, logs = spans_request(list(run.spans)), logs_request(run.logs)
    forms = {
        # a Collector file exporter shared by the traces and logs pipelines
        "mixed.jsonl": (json.dumps(otlp_json(traces)) + "\n" + json.dumps(otlp_json(logs))
                        + "\n").encode(),
        "logs.json": json.dumps(otlp_json(logs), indent=2).encode(),
        "logs.pb": logs.SerializeToString(),
        "mixed.pb-stream": length_prefixed([traces, logs]),
    }
    for name, data in forms.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}.gz").write_bytes(gzip.compress(data, mtime=0))
        with connect(tmp_path / f"{name}.duckdb") as con:
            summary = load_files(con, [folder], progress=False)
            again = load_files(con, [folder], progress=False)
            assert not summary.rejections, (name, summary.lines())
            assert summary.logs_loaded == 4 and again.logs_present == 4, name
            assert summary.logs_without_span == 1
            mixed = "mixed" in name
            assert summary.spans_loaded == (3 if mixed else 0), name
            # without the spans in the same load, the three records in the run wait for them
            assert summary.logs_span_missing == (0 if mixed else 3), name
            assert any("log records: 4 loaded" in line for line in summary.lines())
            row = con.execute("SELECT count(*), count(exception_type) FROM log_records"
                              ).fetchone()
            assert row == (4, 2), name


def test_bad_log_records_in_a_file_are_counted_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl"
    document = _json_document("0af7651916cd43dd8448eb211c80319c")
    path.write_text(json.dumps(document) + "\n{not json\n" + json.dumps(document) + "\n")
    with connect(tmp_path / "db.duckdb") as con:
        summary = load_files(con, [path], progress=False)
    assert summary.logs_loaded == 2 and summary.logs_present == 2
    assert summary.logs_rejected == 6
    assert summary.rejections.counts["malformed_json"] == 1
    assert summary.logs_span_missing == 1 and summary.logs_without_span == 2
    text = "\n".join(summary.lines())
    assert "rejected [bad_log_record] ×6 (6 log records)" in text
    assert "logs.jsonl line 1, resource 0, scope 0, log record 2" in text


def test_cli_ingest_of_a_logs_only_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from budgetscope.cli import cli

    path = tmp_path / "logs.pb.gz"
    path.write_bytes(gzip.compress(logs_request(run_with_logs().logs).SerializeToString()))
    db = tmp_path / "cli.duckdb"
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(path)])
    assert result.exit_code == 0, result.output
    assert "log records: 4 loaded, 0 already present, 0 rejected" in result.output
    assert "1 without a span context and 3 whose span is not stored (yet)" in result.output


def _run_db(tmp_path: Path, hostile_body: str | None = None) -> tuple[str, object]:
    """A database holding one run's spans and log records, derived."""

    run = run_with_logs()
    logs = logs_request(run.logs)
    if hostile_body is not None:
        logs.resource_logs[0].scope_logs[0].log_records[0].body.string_value = hostile_body
    path = tmp_path / "run.pb-stream"
    path.write_bytes(length_prefixed([spans_request(list(run.spans)), logs]))
    db = tmp_path / "run.duckdb"
    with connect(db) as con:
        summary = load_files(con, [path], progress=False, derive=True)
        assert not summary.rejections and summary.logs_loaded == 4
    return str(db), run


HOSTILE = "\x1b[2J\x1b[31mred <b>bold</b> <script>alert(1)</script>"


def test_run_view_and_cli_list_the_runs_log_records(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from budgetscope.cli import cli
    from queries.run_view import load_run

    db, run = _run_db(tmp_path, HOSTILE)
    with connect(db, read_only=True) as con:
        view = load_run(con, run.trace_id)
    records = view.log_records
    # the run's three records (the one outside any span is in no trace), by time
    assert len(records) == 3
    assert list(records["step_key"].fillna("-")) == ["-", "tool:fetch_report", "model:gpt-x"]
    assert list(records["exception_type"])[1:] == ["tests.support.otlp_logs.ReadTimeout",
                                                   "ConnectionResetError"]
    result = CliRunner().invoke(cli, ["--db", db, "run", run.trace_id, "--width", "200"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines.index("Log records: 3")
    assert ("ERROR  tool:fetch_report: tool call failed  exception "
            "tests.support.otlp_logs.ReadTimeout") in lines[start + 2]
    assert "ERROR  model:gpt-x: model call failed  exception ConnectionResetError" \
        in lines[start + 3]
    assert "\x1b" not in result.output  # nothing from a record reaches the terminal raw
    assert "red <b>bold</b>" in lines[start + 1]


@pytest.mark.slow
def test_dashboard_run_view_shows_log_records_as_text(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    from tests.support import ui

    db, run = _run_db(tmp_path, HOSTILE)
    monkeypatch.setenv("BUDGETSCOPE_DB", db)
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    at.query_params["run"] = run.trace_id
    at.switch_page("app_pages/run.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    table = at.dataframe[-1].value
    assert list(table.columns) == ["at", "severity", "span", "body", "exception"]
    assert list(table["severity"]) == ["INFO", "ERROR", "ERROR"]
    assert list(table["span"])[1:] == ["tool:fetch_report", "model:gpt-x"]
    assert table["body"].iloc[0] == HOSTILE  # a dataframe cell: text, never HTML
    assert not any("<script>" in m.value for m in at.markdown)


def test_retention_removes_log_records_with_their_trace_and_loose_ones_by_time(
        tmp_path: Path) -> None:
    import time

    from store import retain

    db, run = _run_db(tmp_path)
    loose = tmp_path / "loose.json"  # records of 2026-11-18 whose trace holds no span
    loose.write_text(json.dumps(_json_document("0af7651916cd43dd8448eb211c80319c")))
    with connect(db) as con:
        assert load_files(con, [loose], progress=False).logs_loaded == 2
        assert con.execute(LOGS).fetchone()[0] == 6
        # a week's retention: the loose records are older, the run's are from now
        retain(con, 7, None)
        assert con.execute(LOGS).fetchone()[0] == 4
        assert con.execute("SELECT count(*) FROM log_records WHERE service_name = "
                           "'json-client'").fetchone()[0] == 0
        # three days on, with a day's retention, the run goes, and its records with it
        result = retain(con, 1, None, now=time.time() + 3 * 86_400)
        assert result.traces == 1
        assert con.execute(LOGS).fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM resources").fetchone()[0] == 0


@pytest.mark.slow
def test_budgetscope_serve_takes_logs_and_counts_them(tmp_path: Path) -> None:
    import urllib.request

    from tests.support.serve import start_serve, stop, stored

    run = run_with_logs()
    db = tmp_path / "served.duckdb"
    process, announced = start_serve(db, "--no-ui")
    try:
        assert announced["otlp_http_logs"].endswith("/v1/logs")
        spans = OTLPSpanExporter(endpoint=announced["otlp_http"], timeout=30)
        assert spans.export(run.spans) is SpanExportResult.SUCCESS
        logs = OTLPLogExporter(endpoint=announced["otlp_http_logs"], timeout=30)
        assert logs.export(run.logs) is LogRecordExportResult.SUCCESS
        assert logs.export(run.logs) is LogRecordExportResult.SUCCESS
        metrics_url = announced["otlp_http"].replace("/v1/traces", "/metrics")
        with urllib.request.urlopen(metrics_url, timeout=30) as response:
            figures = parse(response.read().decode())
        assert figures["budgetscope_log_records_accepted_total"].value(transport="http") == 8
        assert figures["budgetscope_log_records_stored_total"].value() == 4
        assert figures["budgetscope_log_records_without_span_total"].value(
            transport="http") == 2
        spans.shutdown()
        logs.shutdown()
    finally:
        code, out, err = stop(process)
    assert code == 0, err
    assert announced["otlp_http_logs"] in out
    assert stored(db, LOGS) == 4
