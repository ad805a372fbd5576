"""OTLP log records on the ClickHouse backend: the Collector's otel_logs table, as its
ClickHouse exporter writes it, read beside otel_traces; the same run output as on DuckDB."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from bench.support.clickhouse_load.logs import load_log_files
from bench.support.clickhouse_load.traces import load_files
from budgetscope.cli import cli
from ingest.files.loader import load_files as duckdb_load
from store import clickhouse
from store import connect as duckdb_connect
from tests.support.otlp_files import length_prefixed
from tests.support.otlp_files import request as spans_request
from tests.support.otlp_logs import RunWithLogs, logs_request, run_with_logs

# slow, left out of make test-fast: the Collector's otel_logs table in ClickHouse (chdb), 5 s.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory):
    """The same run (spans and log records) in a DuckDB file and in chdb."""
    folder = tmp_path_factory.mktemp("chlogs")
    run = run_with_logs()
    path = folder / "run.pb-stream"
    path.write_bytes(length_prefixed([spans_request(list(run.spans)), logs_request(run.logs)]))
    db = folder / "run.duckdb"
    with duckdb_connect(db) as con:
        duckdb_load(con, [path], progress=False, derive=True)
    data = folder / "data"
    url = f"chdb://{data}"
    con = clickhouse.connect(url)
    assert load_files(con, [path]) == 3
    clickhouse.ensure_derived(con)  # the spans alone first: the records come later
    before = _classes(con, run)
    assert load_log_files(con, [path]) == 4
    assert load_log_files(con, [path]) == 4  # the Collector delivered them twice
    assert clickhouse.ensure_derived(con)  # otel_logs grew: the derivation is rebuilt
    assert not clickhouse.ensure_derived(con)
    yield str(db), url, run, before
    clickhouse.close_all()
    shutil.rmtree(data, ignore_errors=True)


def _classes(con: clickhouse.ClickHouseConnection, run: RunWithLogs) -> dict[str, str]:
    rows = con.frame_text("SELECT span_id, class FROM budgetscope_steps "
                           "WHERE trace_id = {t:String}", {"t": run.trace_id})
    found = dict(zip(rows["span_id"], rows["class"], strict=True))
    return {"tool": found.get(run.tool_span_id), "model": found.get(run.model_span_id)}


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_otel_logs_holds_what_the_exporter_writes(loaded: tuple) -> None:
    _, url, run, _ = loaded
    con = clickhouse.connect(url)
    rows = con.frame_text(
        "SELECT SpanId, SeverityNumber, Body, LogAttributes['exception.type'] AS t "
        "FROM otel_logs WHERE TraceId = {t:String} ORDER BY Timestamp", {"t": run.trace_id})
    assert len(rows) == 6  # three records of the run, each delivered twice
    assert set(rows["t"]) == {"", "tests.support.otlp_logs.ReadTimeout", "ConnectionResetError"}


def test_run_command_lists_the_same_log_records(loaded: tuple) -> None:
    db, url, run, _ = loaded
    on_clickhouse = invoke("--backend", url, "run", run.trace_id)
    on_duckdb = invoke("--db", db, "run", run.trace_id)
    assert "Log records: 3" in on_clickhouse
    tail = on_clickhouse[on_clickhouse.index("Log records:"):]
    assert tail == on_duckdb[on_duckdb.index("Log records:"):]


def test_exception_log_records_class_their_spans_as_on_duckdb(loaded: tuple) -> None:
    db, url, run, before = loaded
    assert before == {"tool": "error", "model": "error"}  # the spans alone
    con = clickhouse.connect(url)
    with duckdb_connect(db, read_only=True) as duck:
        rows = dict(duck.execute("SELECT span_id, class FROM steps WHERE trace_id = ?",
                                 [run.trace_id]).fetchall())
    on_duckdb = {"tool": rows[run.tool_span_id], "model": rows[run.model_span_id]}
    assert _classes(con, run) == on_duckdb == {"tool": "client_timeout",
                                                "model": "upstream_error"}
    assert invoke("--backend", url, "report", "failures") == \
        invoke("--db", db, "report", "failures")
