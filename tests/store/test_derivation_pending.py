"""Derived runs and steps catch up with stored spans after the acknowledged write, and nothing
stored is ever left underived: not after a failed derivation, not after a crash."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from budgetscope.cli import cli
from ingest.decode.flatten import flatten_request
from ingest.files.loader import load_files
from store import GroupCommitter, SpanWriter, connect
from store.testing import PendingDerivations, refresh_touched
from tests.support.otlp_files import otlp_json, request, sdk_spans


def _runs(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute("SELECT count(*) FROM runs").fetchone()[0]


def _pending(con: duckdb.DuckDBPyConnection) -> int:
    return PendingDerivations.count(con)


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    connection = connect(tmp_path / "t.duckdb")
    yield connection
    connection.close()


def _write_three_runs(con: duckdb.DuckDBPyConnection) -> None:
    SpanWriter(con).write(flatten_request(request(sdk_spans(runs=3))))


def test_a_write_marks_its_traces_and_derivation_clears_them(
    con: duckdb.DuckDBPyConnection,
) -> None:
    _write_three_runs(con)
    assert (_runs(con), _pending(con)) == (0, 3)
    assert PendingDerivations(refresh_touched).run(con) == 3
    assert (_runs(con), _pending(con)) == (3, 0)


@pytest.mark.slow
def test_a_failed_derivation_leaves_the_marks_and_the_next_one_catches_up(
    con: duckdb.DuckDBPyConnection,
) -> None:
    _write_three_runs(con)

    def broken(connection: duckdb.DuckDBPyConnection) -> None:
        refresh_touched(connection)
        raise OSError("No space left on device")

    with pytest.raises(OSError):
        PendingDerivations(broken).run(con)
    assert (_runs(con), _pending(con)) == (0, 3)  # rolled back together
    PendingDerivations(refresh_touched).run(con)
    assert (_runs(con), _pending(con)) == (3, 0)


def test_spans_stored_long_before_their_derivation_are_all_read(
    con: duckdb.DuckDBPyConnection,
) -> None:
    # A server killed before deriving, restarted two hours later: the derivation must read the
    # spans from when they were stored, not from "a minute ago".
    _write_three_runs(con)
    con.execute("UPDATE spans SET received_at = received_at - INTERVAL 2 HOUR")
    con.execute("UPDATE pending_derivations SET since = since - INTERVAL 2 HOUR")
    PendingDerivations(refresh_touched).run(con)
    steps = con.execute("SELECT count(*) FROM steps").fetchone()[0]
    assert (_runs(con), steps) == (3, 9)  # each run: write, reconcile, model


def test_derivation_goes_in_slices(con: duckdb.DuckDBPyConnection) -> None:
    _write_three_runs(con)
    derivations = PendingDerivations(refresh_touched, slice_traces=2)
    assert derivations.run(con) == 3
    assert (_runs(con), _pending(con)) == (3, 0)


def test_a_file_load_ends_with_everything_derived(tmp_path: Path,
                                                  con: duckdb.DuckDBPyConnection) -> None:
    import json

    path = tmp_path / "t.json"
    path.write_text(json.dumps(otlp_json(request(sdk_spans(runs=4)))))
    summary = load_files(con, [path], derive=True)
    assert summary.spans_loaded == 16
    assert (_runs(con), _pending(con)) == (4, 0)


def test_the_receivers_writer_derives_soon_after_acknowledging(
    con: duckdb.DuckDBPyConnection,
) -> None:
    committer = GroupCommitter(con.cursor(), derive=refresh_touched, derive_every_seconds=0.2)
    try:
        batch = flatten_request(encode_spans(sdk_spans(runs=2)))
        assert committer.submit(batch).result(timeout=30).inserted == 8
        deadline = time.monotonic() + 20
        while _runs(con) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _runs(con) == 2
    finally:
        assert committer.close(timeout=30)
    assert _pending(con) == 0


def test_commits_go_on_while_a_trace_is_derived_and_its_new_spans_are_derived_next(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """The derivation runs beside the writer (store/write/group_commit.py): a request is committed
    while a derivation turn is still open, and the spans it adds to the trace being derived
    (which that turn's snapshot does not hold) keep their mark and are derived by the next turn.
    With one mark per trace (schema 2's key) the new mark merged into the one being removed."""
    spans = sdk_spans(runs=1)  # the run span, then its three steps
    root = next(span for span in spans if span.parent is None)
    first = [root, *[span for span in spans if span is not root][:2]]
    later = [span for span in spans if span not in first]
    turn_open, release = threading.Event(), threading.Event()

    def derive_held_open(connection: duckdb.DuckDBPyConnection) -> None:
        if not turn_open.is_set():  # the first turn waits, inside its transaction
            turn_open.set()
            assert release.wait(30)
        refresh_touched(connection)

    committer = GroupCommitter(con.cursor(), derive=derive_held_open, derive_every_seconds=0.05)
    try:
        assert committer.submit(flatten_request(encode_spans(first))).result(timeout=30)
        assert turn_open.wait(30)
        late = committer.submit(flatten_request(encode_spans(later))).result(timeout=30)
        assert late.inserted == len(later)  # committed while the derivation holds the trace
        time.sleep(0.1)
        assert committer.derivation_lag_seconds >= 0.1  # /metrics shows the wait
        release.set()
        deadline = time.monotonic() + 20
        while committer.derivation_lag_seconds and time.monotonic() < deadline:
            time.sleep(0.05)
        assert committer.derivation_lag_seconds == 0  # the next turn derived the late spans
    finally:
        release.set()
        assert committer.close(timeout=30)
    steps = con.execute("SELECT count(*) FROM steps").fetchone()[0]
    assert (_runs(con), steps, _pending(con)) == (1, 3, 0)


def test_a_trace_marked_by_two_writes_is_pending_once(con: duckdb.DuckDBPyConnection) -> None:
    from queries import reports
    from queries.filters import Filters

    spans = sdk_spans(runs=1)
    for part in (spans[:2], spans[2:]):
        SpanWriter(con).write(flatten_request(encode_spans(part)))
    assert con.execute("SELECT count(*) FROM pending_derivations").fetchone()[0] == 2
    assert _pending(con) == 1
    assert reports.database_status(con, Filters()).iloc[0]["traces_pending_derivation"] == 1
    assert PendingDerivations(refresh_touched).run(con) == 1
    assert (_runs(con), _pending(con)) == (1, 0)


def test_commands_catch_up_on_what_a_crashed_writer_left(tmp_path: Path) -> None:
    db = tmp_path / "crashed.duckdb"
    connection = connect(db)
    _write_three_runs(connection)  # stored and marked, never derived: as after kill -9
    connection.close()
    result = CliRunner().invoke(cli, ["--db", str(db), "report", "runs"])
    assert result.exit_code == 0, result.output
    assert len(result.output.strip().splitlines()) == 1 + 3  # header and three runs
    connection = connect(db)
    assert _pending(connection) == 0
    connection.close()
