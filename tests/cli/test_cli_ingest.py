"""`budgetscope ingest` through the real CLI: exit codes, summaries, a database held elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from budgetscope.commands.common import WRITER_WAIT_SECONDS
from store import SchemaError
from store.testing import SCHEMA_VERSION, apply_schema, ddl_files
from tests.support.otlp_files import otlp_json, request, sdk_spans


def _good_file(folder: Path) -> Path:
    path = folder / "good.json"
    path.write_text(json.dumps(otlp_json(request(sdk_spans(runs=1)))))
    return path


def test_ingest_reports_and_exits_zero(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    good = _good_file(tmp_path)
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(good)])
    assert result.exit_code == 0, result.output
    assert "4 spans loaded, 0 already present, 0 rejected" in result.output
    again = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(good)])
    assert again.exit_code == 0, again.output
    assert "0 spans loaded, 4 already present, 0 rejected" in again.output


def test_db_comes_from_the_environment(tmp_path: Path) -> None:
    db = tmp_path / "env.duckdb"
    result = CliRunner().invoke(cli, ["ingest", str(_good_file(tmp_path))],
                                env={"BUDGETSCOPE_DB": str(db)})
    assert result.exit_code == 0, result.output
    assert db.exists()


def test_anything_rejected_makes_the_exit_status_non_zero(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "t.duckdb"), "ingest",
                                      str(_good_file(tmp_path)), str(bad)])
    assert result.exit_code == 1, result.output
    assert "4 spans loaded" in result.output
    assert f"{bad} line 1 column 2: malformed JSON" in result.output
    assert "Traceback" not in result.output


def test_usage_errors_exit_two(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "t.duckdb"), "ingest"])
    assert result.exit_code == 2


@pytest.mark.slow
def test_a_database_held_by_another_process_fails_after_a_bounded_wait_naming_it(
        tmp_path: Path) -> None:
    """A writer waits WRITER_WAIT_SECONDS for a holder to let go (a reader's moment), then
    fails naming it, never waiting for the lock for ever. (It asserted < 10 s, the wait
    itself: 9.93 s quiet, 10.0 s on a loaded CI, red.)"""
    db = tmp_path / "held.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); print('ready', flush=True);"
         " time.sleep(60)", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        started = time.monotonic()
        result = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(_good_file(tmp_path))])
        waited = time.monotonic() - started
        assert WRITER_WAIT_SECONDS - 1 < waited < WRITER_WAIT_SECONDS + 20, waited
        assert result.exit_code == 1
        assert f"process {holder.pid}" in result.output
        assert "Traceback" not in result.output
    finally:
        holder.kill()
        holder.wait()


def test_every_ddl_file_is_listed_in_order() -> None:
    names = ddl_files()
    assert names[0] == "meta.sql" and "spans.sql" in names


def test_a_database_from_another_schema_version_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    apply_schema(con)
    con.execute("UPDATE budgetscope_meta SET value = ? WHERE key = 'schema_version'",
                [str(SCHEMA_VERSION + 41)])
    try:
        apply_schema(con)
    except SchemaError as error:
        assert f"schema version {SCHEMA_VERSION + 41}" in str(error)
    else:
        raise AssertionError("a foreign schema version was accepted")
    finally:
        con.close()
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(_good_file(tmp_path))])
    assert result.exit_code == 1
    assert "schema version" in result.output and "Traceback" not in result.output


def test_a_missing_path_is_a_usage_error_and_creates_nothing(tmp_path: Path) -> None:
    """Regression: a missing path said "0 rejected" then "rejected ×1" and exited 1."""
    db = tmp_path / "t.duckdb"
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(tmp_path / "nope.json")])
    assert result.exit_code == 2, result.output
    assert f"no such file or folder: {tmp_path / 'nope.json'}" in result.output
    assert not db.exists()


def test_an_empty_file_says_nothing_was_loaded_and_leaves_no_database(tmp_path: Path) -> None:
    """Regression: an empty file exited 0 silently and left an 800 KB database behind."""
    db = tmp_path / "t.duckdb"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(empty)])
    assert result.exit_code == 1, result.output
    assert f"nothing to load: no spans in {empty}" in result.output
    assert not db.exists()
    # An existing database is never removed for that.
    assert CliRunner().invoke(cli, ["--db", str(db), "ingest",
                                    str(_good_file(tmp_path))]).exit_code == 0
    again = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(empty)])
    assert again.exit_code == 1
    assert db.exists()


def _rootless_file(folder: Path) -> tuple[Path, Path, str]:
    """One run's spans without its root (as smolagents leaves a run that raised), and the root
    alone in a second file; and the trace id."""
    document = otlp_json(request(sdk_spans(runs=1)))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    roots = [span for span in spans if not span.get("parentSpanId")]
    spans[:] = [span for span in spans if span.get("parentSpanId")]
    children = folder / "children.json"
    children.write_text(json.dumps(document))
    spans[:] = roots
    root = folder / "root.json"
    root.write_text(json.dumps(document))
    return children, root, roots[0]["traceId"]


def test_a_trace_without_its_root_is_measured_once_the_files_are_read(tmp_path: Path) -> None:
    """docs/conventions.md: ingest decides at once (--root-grace 0): the trace is a run measured
    from its earliest span, under the trace id, and its root arriving later replaces that run."""
    db = tmp_path / "t.duckdb"
    children, root, trace_id = _rootless_file(tmp_path)
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(children)])
    assert result.exit_code == 0, result.output
    assert "measured from their earliest span" in result.output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT run_id, root_missing FROM runs").fetchall() == [
            (trace_id, True)]
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest", str(root)])
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT run_id, root_missing FROM runs").fetchall() == [
            (trace_id, False)]


def test_a_grace_period_leaves_a_rootless_trace_waiting(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    children, _, trace_id = _rootless_file(tmp_path)
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest", "--root-grace", "5m",
                                      str(children)])
    assert result.exit_code == 0, result.output
    assert "waiting for it" in result.output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        assert con.execute("SELECT trace_id FROM traces_awaiting_root").fetchall() == [
            (trace_id,)]
    bad = CliRunner().invoke(cli, ["--db", str(db), "ingest", "--root-grace", "soon",
                                   str(children)])
    assert bad.exit_code == 2 and "not a positive duration" in bad.output
