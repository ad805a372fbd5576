"""One span must never stop the database.

A budget.* number out of range (a deadline in microseconds, a budget of 2^62 ms) overflowed the
derivation's BIGINT arithmetic; from then on no trace was derived and every command failed on the
file. Now such values are refused at ingest with a counted reason (store/rows/typed_attributes.py),
and a derivation failure of any other cause is confined to the traces that caused it
(store/derive/pending.py): they are recorded, every other trace is derived, and every command keeps
working. Both tests below failed on main before the change (checked: the fuzzer's first
example with budget.total_ms 2^62 raised "Overflow in multiplication of INT64").
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from budgetscope.cli import cli
from budgetscope.server.operations import OperatorPages
from ingest.decode.otlp_json import flatten_json_request
from ingest.decode.proto_flatten import flatten_protobuf
from ingest.receivers.auth import BearerToken
from ingest.receivers.counters import ReceiverCounters
from ingest.receivers.span_intake import SpanIntake
from queries import reports
from store import TYPED_ATTRIBUTES, FlatBatch, GroupCommitter, SpanWriter, connect
from store.testing import BUDGET_BOUNDS, BUDGET_NUMBER_KEYS, PendingDerivations, refresh_touched
from tests.support.fuzz_harness import NOTORIOUS_BUDGET_VALUES, RUN_BUDGET_KEYS
from tests.support.fuzz_harness import budget_run as _trace  # one SDK run, `key` set to `value`
from tests.support.otlp_files import otlp_json, request

HOSTILE = st.one_of(
    st.sampled_from(NOTORIOUS_BUDGET_VALUES),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
)


def _flatten(spans: list[ReadableSpan], as_json: bool) -> FlatBatch:
    message = encode_spans(spans)
    if as_json:
        return flatten_json_request(json.loads(json.dumps(otlp_json(message))))
    return flatten_protobuf(message.SerializeToString())


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    con = connect(tmp_path_factory.mktemp("fuzzed") / "fuzzed.duckdb")
    yield con
    con.close()


_examples = {"n": 0}


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(key=st.sampled_from(BUDGET_NUMBER_KEYS), value=HOSTILE, as_json=st.booleans())
def test_every_budget_number_is_bounded_at_ingest_and_never_stops_the_derivation(
    fuzzed: duckdb.DuckDBPyConnection, key: str, value: Any, as_json: bool,
) -> None:
    _examples["n"] += 1
    start_ns = time.time_ns() - 3600 * 10**9 + _examples["n"] * 10**9
    spans = _trace(key, value, start_ns)
    batch = _flatten(spans, as_json)
    assert batch.span_count == 2, batch.rejections  # the span is kept, whatever the value
    column = TYPED_ATTRIBUTES[key][0]
    span_index = 1 if key in RUN_BUDGET_KEYS else 0  # the SDK exports the child first
    stored = batch.spans[column][span_index]
    low, high = BUDGET_BOUNDS[key]
    assert stored is None or low <= stored <= high, (key, value, stored)
    reasons = {r.reason for r in batch.rejections}
    if stored is None:
        # Present but unusable: said, with a counted reason that names the attribute.
        assert reasons & {"budget_out_of_range", "budget_not_a_number"}, (key, value)
        assert all(key in r.message for r in batch.rejections)
        assert all(r.spans == 0 for r in batch.rejections)
    else:
        assert not batch.rejections
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            assert stored == round(value)
    SpanWriter(fuzzed).write(batch)
    PendingDerivations(refresh_touched).run(fuzzed)
    trace_id = batch.spans["trace_id"][0]
    assert fuzzed.execute("SELECT count(*) FROM runs WHERE trace_id = ?",
                          [trace_id]).fetchone()[0] == 1
    assert PendingDerivations.failed(fuzzed) == 0
    assert PendingDerivations.count(fuzzed) == 0


def _file(folder: Path, name: str, spans: list[ReadableSpan]) -> Path:
    path = folder / name
    path.write_bytes(encode_spans(spans).SerializeToString())
    return path


def _every_command_works(db: Path, run_id: str, folder: Path) -> None:
    runner = CliRunner()
    for args in (["report", name] for name in ("weekly", "runs", "attribution", "failures",
                                               "utilisation", "reconciliation")):
        result = runner.invoke(cli, ["--db", str(db), *args])
        assert result.exit_code == 0, (args, result.output)
    check = ["check", "--max-exhaustion-rate", "0.5", "--window", "3650d"]
    for args, codes in ((["run", run_id], {0}), (check, {0, 1}),
                        (["simulate", "--deadline", "5s"], {0}),
                        (["retain", "--days", "3650"], {0})):
        result = runner.invoke(cli, ["--db", str(db), *args])
        assert result.exit_code in codes, (args, result.output)
        assert "Traceback" not in result.output and "Error:" not in result.output, result.output
    healthy = _file(folder, "later.pb", _trace("budget.reserve_ms", 100,
                                               time.time_ns() - 600 * 10**9))
    result = runner.invoke(cli, ["--db", str(db), "ingest", str(healthy)])
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_every_command_works_on_a_file_with_hostile_budget_values(tmp_path: Path) -> None:
    start = time.time_ns() - 7200 * 10**9
    spans: list[ReadableSpan] = []
    for index, (key, value) in enumerate((key, value) for key in BUDGET_NUMBER_KEYS
                                         for value in NOTORIOUS_BUDGET_VALUES):
        spans += _trace(key, value, start + index * 10**9)
    db = tmp_path / "hostile.duckdb"
    result = CliRunner().invoke(cli, ["--db", str(db), "ingest",
                                      str(_file(tmp_path, "hostile.pb", spans))])
    # Every span is stored; the refused values are counted by reason (exit 1: input refused).
    assert result.exit_code == 1, result.output
    assert f"{len(spans):,} spans loaded" in result.output
    assert "rejected [budget_out_of_range]" in result.output
    assert "rejected [budget_not_a_number]" in result.output
    con = connect(db, read_only=True)
    try:
        status = reports.database_status(con).iloc[0]
        run_id = con.execute("SELECT min(run_id) FROM runs").fetchone()[0]
    finally:
        con.close()
    assert (status["runs"], status["traces_pending_derivation"],
            status["traces_failed_derivation"]) == (len(spans) // 2, 0, 0)
    _every_command_works(db, run_id, tmp_path)


def _poison(con: duckdb.DuckDBPyConnection, trace_id: str) -> None:
    """What a file written before the ingest bounds holds: a budget the derivation cannot
    multiply into nanoseconds; marked pending, as a write of new spans would."""
    con.execute("UPDATE spans SET budget_total_ms = 4611686018427387904 "
                "WHERE trace_id = ? AND parent_span_id IS NULL", [trace_id])
    con.execute("INSERT INTO pending_derivations VALUES (?, now())", [trace_id])


@pytest.mark.slow
def test_a_trace_that_fails_derivation_is_confined_and_every_command_keeps_working(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.duckdb"
    start = time.time_ns() - 7200 * 10**9
    spans = [span for index in range(6) for span in _trace("budget.reserve_ms", 100,
                                                           start + index * 10**9)]
    assert CliRunner().invoke(cli, ["--db", str(db), "ingest",
                                    str(_file(tmp_path, "a.pb", spans))]).exit_code == 0
    con = connect(db)
    trace_ids = [row[0] for row in con.execute(
        "SELECT trace_id FROM runs ORDER BY start_ns").fetchall()]
    _poison(con, trace_ids[2])
    con.execute("UPDATE runs SET budget_ms = NULL")  # so that re-derived runs can be told
    con.execute("INSERT INTO pending_derivations SELECT trace_id, now() FROM runs")
    con.close()

    _every_command_works(db, trace_ids[0], tmp_path)

    con = connect(db)
    try:
        failures = con.execute("SELECT trace_id, error FROM derivation_failures").fetchall()
        assert [trace_id for trace_id, _ in failures] == [trace_ids[2]]
        assert "Overflow" in failures[0][1]
        # Every healthy trace was derived again; the failed one keeps its last derivation.
        budgets = dict(con.execute("SELECT trace_id, budget_ms FROM runs").fetchall())
        assert [budgets[t] for t in trace_ids] == [2000, 2000, None, 2000, 2000, 2000]
        status = reports.database_status(con).iloc[0]
        assert (status["traces_pending_derivation"], status["traces_failed_derivation"]) == (0, 1)
        # New spans of the trace retry it; once it derives, the failure is over.
        con.execute("UPDATE spans SET budget_total_ms = 2000 WHERE trace_id = ?", [trace_ids[2]])
        con.execute("INSERT INTO pending_derivations VALUES (?, now())", [trace_ids[2]])
        PendingDerivations(refresh_touched).run(con)
        assert PendingDerivations.failed(con) == 0
        assert con.execute("SELECT budget_ms FROM runs WHERE trace_id = ?",
                           [trace_ids[2]]).fetchone()[0] == 2000
    finally:
        con.close()


@pytest.mark.slow
def test_a_slice_with_several_bad_traces_derives_all_the_others(tmp_path: Path) -> None:
    con = connect(tmp_path / "many.duckdb")
    start = time.time_ns() - 7200 * 10**9
    batch = FlatBatch()
    for index in range(40):
        batch.extend(_flatten(_trace("budget.reserve_ms", 100, start + index * 10**9), False))
    SpanWriter(con).write(batch)
    trace_ids = sorted(set(batch.spans["trace_id"]))
    bad = trace_ids[3:40:9]  # 5 of 40, spread over the slice
    for trace_id in bad:
        _poison(con, trace_id)
    derivations = PendingDerivations(refresh_touched)
    assert derivations.run(con) == 35
    assert derivations.traces_failed == 5
    assert sorted(r[0] for r in con.execute("SELECT trace_id FROM derivation_failures")
                  .fetchall()) == bad
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 35
    assert PendingDerivations.count(con) == 0
    con.close()


@pytest.mark.slow
def test_the_server_stays_ready_and_counts_traces_that_fail_derivation(tmp_path: Path) -> None:
    con = connect(tmp_path / "served.duckdb")
    start = time.time_ns() - 7200 * 10**9
    SpanWriter(con).write(_flatten(_trace("budget.reserve_ms", 1, start), False))
    _poison(con, con.execute("SELECT min(trace_id) FROM spans").fetchone()[0])
    committer = GroupCommitter(con.cursor(), derive=refresh_touched, derive_every_seconds=0.1)
    pages = OperatorPages(committer, ReceiverCounters(), BearerToken(None))
    try:
        # A healthy trace after the poisoned one is still derived.
        healthy = _flatten(_trace("budget.reserve_ms", 1, start + 10**9), False)
        committer.submit(healthy).result(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
                committer.derivation_failed_traces == 0
                or con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0):
            time.sleep(0.05)
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        status, _, body, _ = pages.readyz(None)
        assert status == 200
        assert b"1 trace(s) could not be derived" in body
        # A value refused at ingest is counted by reason, through the receivers' exporter.
        exporter = SpanIntake(committer, commit_timeout=30)
        accepted = exporter.export_protobuf(request(_trace(
            "budget.deadline_unix_ms", time.time_ns() // 1000, start + 2 * 10**9))
            .SerializeToString(), "test")
        assert accepted.rejected_spans == 0 and "budget_out_of_range" in accepted.error_message
        pages = OperatorPages(committer, exporter.counters, BearerToken(None))
        _, _, metrics, _ = pages.metrics(None)
        assert b"budgetscope_derivation_failed_traces 1" in metrics
        assert b'budgetscope_values_refused_total{reason="budget_out_of_range"} 1' in metrics
    finally:
        assert committer.close(timeout=30)
        con.close()


@pytest.mark.slow
def test_the_dashboard_opens_on_a_file_with_a_failed_trace_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamlit.testing.v1 import AppTest

    from tests.support import ui

    db = tmp_path / "dash.duckdb"
    con = connect(db)
    start = time.time_ns() - 7200 * 10**9
    batch = FlatBatch()
    for index in range(3):
        batch.extend(_flatten(_trace("budget.reserve_ms", 1, start + index * 10**9), False))
    SpanWriter(con).write(batch)
    PendingDerivations(refresh_touched).run(con)
    _poison(con, batch.spans["trace_id"][0])
    PendingDerivations(refresh_touched).run(con)
    con.close()
    monkeypatch.setenv("BUDGETSCOPE_DB", str(db))
    for page in ("overview", "failures"):
        at = AppTest.from_file(str(ui.APP), default_timeout=120)
        at.query_params["range"] = "all"
        if page != "overview":
            at.switch_page(f"app_pages/{page}.py")
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        assert any("1 trace(s) could not be derived" in w.value for w in at.sidebar.warning)
