"""Retention: old traces go whole, a trace that straddles the cutoff stays whole,
nothing else is touched, acknowledged ingestion goes on while it runs, and the space is reused.

A trace is old when its newest span ended before now − N days
(store/retention/sql/retention_expired.sql).
"""

from __future__ import annotations

import http.client
import os
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from budgetscope.cli import cli
from ingest.decode.flatten import flatten_request
from store import RetentionSchedule, SpanWriter, connect, retain
from store.testing import DAY_NS, RetentionPass, cutoff_for
from tests.support.receivers import running_receivers
from tests.support.trace_builder import TraceBuilder, store

NOW_S = 1_796_000_000.0  # 2026-11-30T06:53:20Z: a fixed "now" for the unit tests
NOW_NS = int(NOW_S * 10**9)
DAY_MS = 86_400_000
DERIVED = ("runs", "steps", "reconcile_links", "trace_arrivals", "pending_derivations")


def days_ago(days: float) -> int:
    return NOW_NS - int(days * DAY_NS)


def build(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Traces around a 30-day cutoff. Returns name → trace id."""
    b = TraceBuilder(seed=5, service="shared-svc")
    ids: dict[str, str] = {}
    # A: 40 days old, on a service nobody else uses, with a write and its reconciliation.
    t = days_ago(40)
    a = b.span("agent run", 0, 5_000, attributes={"budget.total_ms": 10_000}, t0_ns=t,
               service="old-only-svc")
    write = b.span("tool save", 0, 1_000, parent=a, t0_ns=t, service="old-only-svc",
                   attributes={"budget.step.kind": "tool", "budget.side_effect": "write",
                               "budget.outcome": "client_timeout",
                               "budget.idempotency_key": "k-a"})
    b.span("reconcile check", 1_000, 2_000, parent=a, t0_ns=t, service="old-only-svc",
           attributes={"budget.step.kind": "reconcile", "budget.idempotency_key": "k-a"})
    ids["A"] = b.trace_id(a)
    # B: 35 days old on the shared service.
    t = days_ago(35)
    run = b.span("agent run", 0, 3_000, attributes={"budget.total_ms": 10_000}, t0_ns=t)
    b.span("tool fetch", 0, 1_000, parent=run, t0_ns=t,
           attributes={"budget.step.kind": "tool"})
    ids["B"] = b.trace_id(run)
    # S: starts 31 days ago, its run ends 29 days ago: straddles the cutoff, stays whole.
    t = days_ago(31)
    run = b.span("agent run", 0, 2 * DAY_MS, attributes={"budget.total_ms": 3 * DAY_MS},
                 t0_ns=t)
    b.span("tool early", 0, 1_000, parent=run, t0_ns=t, attributes={"budget.step.kind": "tool"})
    ids["S"] = b.trace_id(run)
    # S2: its root ended 31 days ago, a child it left running ended 29 days ago: stays whole.
    t = days_ago(31)
    run = b.span("agent run", 0, 1_000, attributes={"budget.total_ms": 5_000}, t0_ns=t)
    b.span("tool detached", 0, 2 * DAY_MS, parent=run, t0_ns=t,
           attributes={"budget.step.kind": "tool"})
    ids["S2"] = b.trace_id(run)
    # N: a day old, with a reconcile step that links to A's write (a link across traces).
    t = days_ago(1)
    run = b.span("agent run", 0, 2_000, attributes={"budget.total_ms": 10_000}, t0_ns=t)
    b.span("reconcile late", 0, 500, parent=run, t0_ns=t, links=[write],
           attributes={"budget.step.kind": "reconcile"})
    ids["N"] = b.trace_id(run)
    store(con, b.finished())
    # P: 50 days old, stored but not derived yet (its pending mark must go with it).
    p = TraceBuilder(seed=6, service="shared-svc")
    run = p.span("agent run", 0, 1_000, attributes={"budget.total_ms": 5_000},
                 t0_ns=days_ago(50))
    SpanWriter(con).write(flatten_request(encode_spans(p.finished())))
    ids["P"] = p.trace_id(run)
    return ids


def rows(con: duckdb.DuckDBPyConnection, table: str, traces: list[str]) -> list[tuple]:
    return con.execute(f"SELECT * FROM {table} WHERE trace_id IN (SELECT unnest($ids)) "
                       "ORDER BY ALL", {"ids": traces}).fetchall()


def test_old_traces_go_whole_straddling_ones_stay_and_nothing_else_changes(
        tmp_path: Path) -> None:
    con = connect(tmp_path / "r.duckdb")
    try:
        ids = build(con)
        kept, removed = [ids["S"], ids["S2"], ids["N"]], [ids["A"], ids["B"], ids["P"]]
        before = {table: rows(con, table, kept) for table in ("spans", *DERIVED)}
        assert rows(con, "pending_derivations", [ids["P"]])  # P is marked, not derived
        assert rows(con, "reconcile_links", [ids["N"]])  # N's link to A's write
        old_spans = con.execute("SELECT count(*) FROM spans WHERE trace_id IN "
                                "(SELECT unnest($ids))", {"ids": removed}).fetchone()[0]
        assert old_spans == 3 + 2 + 1

        result = retain(con, 30, None, now=NOW_S, slice_traces=1)

        assert (result.traces, result.spans, result.slices) == (3, old_spans, 3)
        assert result.cutoff_ns == days_ago(30)
        for table in ("spans", *DERIVED):
            assert rows(con, table, removed) == [], table
            assert rows(con, table, kept) == before[table], table  # untouched, row for row
        services = [r[0] for r in con.execute(
            "SELECT service_name FROM resources ORDER BY 1").fetchall()]
        assert services == ["shared-svc"]  # old-only-svc had no span left
        assert (result.resources, result.scopes) == (1, 0)
        # The kept link to a removed write no longer reconciles anything, and breaks nothing.
        assert con.execute("SELECT count(*) FROM reconciliations").fetchone()[0] == 0
        assert retain(con, 30, None, now=NOW_S).traces == 0  # nothing left to remove
    finally:
        con.close()


def test_a_span_arriving_during_the_pass_makes_its_trace_young_again(tmp_path: Path) -> None:
    con = connect(tmp_path / "late.duckdb")
    try:
        b = TraceBuilder(seed=9)
        t = days_ago(40)
        run = b.span("agent run", 0, 1_000, attributes={"budget.total_ms": 5_000}, t0_ns=t)
        store(con, b.finished())
        work = RetentionPass(cutoff_for(30, NOW_S), None)
        assert work.begin(con) == 1
        # An exporter delivers one more span of that trace, ending after the cutoff.
        late = TraceBuilder(seed=10)
        late.span("tool late", 0, 1_000, parent=run, t0_ns=days_ago(1),
                  attributes={"budget.step.kind": "tool"})
        store(con, late.finished())
        while work.next_slice(con):
            pass
        result = work.finish(con)
        assert result.traces == 0
        assert con.execute("SELECT count(*) FROM spans").fetchone()[0] == 2
    finally:
        con.close()


def test_retain_command(tmp_path: Path) -> None:
    db = tmp_path / "cli.duckdb"
    con = connect(db)
    try:
        ids = build(con)
    finally:
        con.close()
    # The command has no --now: ask for 30 days before NOW_S, counted from today.
    age_days = (time.time() - NOW_S) / 86_400
    result = CliRunner().invoke(cli, ["--db", str(db), "retain", "--days", f"{30 + age_days}"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("removed 3 traces (6 spans, 1 resources, 0 scopes)")
    con = connect(db)
    try:
        left = {r[0] for r in con.execute("SELECT DISTINCT trace_id FROM spans").fetchall()}
    finally:
        con.close()
    assert left == {ids["S"], ids["S2"], ids["N"]}
    bad = CliRunner().invoke(cli, ["--db", str(db), "retain", "--days", "0"])
    assert bad.exit_code == 2
    missing = CliRunner().invoke(cli, ["--db", str(tmp_path / "no.duckdb"), "retain",
                                       "--days", "3"])
    assert missing.exit_code == 1 and "no database at" in missing.output


def _request(spans_per_trace: int, traces: int, end_ns: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "retention-test"
    scope_spans = resource_spans.scope_spans.add()
    for _ in range(traces):
        trace_id = os.urandom(16)
        for index in range(spans_per_trace):
            span = scope_spans.spans.add()
            span.trace_id, span.span_id = trace_id, os.urandom(8)
            span.name = f"span {index}"
            span.start_time_unix_nano = end_ns - 1_000_000
            span.end_time_unix_nano = end_ns
    return request


def _fill(path: Path, old: int, new: int, per_request: int = 5_000) -> None:
    """`old` spans 100 days old and `new` spans a day old, 5 spans a trace."""
    con = connect(path)
    try:
        # one checkpoint, at the end: an automatic one halfway through (the WAL passing DuckDB's
        # 16 MB threshold, which a wider spans table reaches sooner) rewrites a row group and
        # leaves free blocks in the control file too, which is not what is measured here
        con.execute("SET checkpoint_threshold = '1GB'")
        writer = SpanWriter(con)
        now_ns = time.time_ns()
        for count, age in ((old, 100), (new, 1)):
            for _ in range(count // per_request):
                writer.write(flatten_request(_request(5, per_request // 5,
                                                      now_ns - age * DAY_NS)))
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _blocks(path: Path) -> tuple[int, int]:
    """(blocks in the file, free blocks among them)."""
    con = connect(path)
    try:
        row = con.execute("SELECT total_blocks, free_blocks FROM pragma_database_size()"
                          ).fetchone()
    finally:
        con.close()
    return int(row[0]), int(row[1])


@pytest.mark.slow
def test_freed_space_is_reused_by_new_spans(tmp_path: Path) -> None:
    """What DuckDB 2.0 does with the space, measured rather than assumed: retention's
    CHECKPOINT marks the blocks of the deleted rows free (it even adds blocks: the rewritten
    row groups are written before the old ones are freed), the file does not shrink, and
    later spans go into the free blocks, so a file under retention stops growing where one
    without it grows by the full size of the new spans."""
    growth = {}
    for name, with_retention in (("control", False), ("retained", True)):
        path = tmp_path / f"{name}.duckdb"
        _fill(path, old=15_000, new=15_000)
        if with_retention:
            total_before, _ = _blocks(path)
            con = connect(path)
            try:
                result = retain(con, 30, str(path))
            finally:
                con.close()
            assert (result.traces, result.spans) == (3_000, 15_000)
            total_after, free_after = _blocks(path)
            print(f"retention: {total_before} blocks before, {total_after} after, "
                  f"{free_after} of them free; bytes {result.file_bytes_before:,} → "
                  f"{result.file_bytes_after:,}")
            assert free_after > 0  # the deleted rows' blocks are free for reuse
            assert total_after >= total_before  # and the file did not shrink
        blocks_before, _ = _blocks(path)
        _fill(path, old=0, new=15_000)
        growth[name] = _blocks(path)[0] - blocks_before
    print(f"blocks added by 15k more spans: {growth}")
    assert growth["control"] > 0
    assert growth["retained"] < growth["control"] / 2, growth


@pytest.mark.slow
def test_ingestion_goes_on_while_retention_runs(tmp_path: Path) -> None:
    with running_receivers(tmp_path) as running:
        # 1 000 old traces of 5 spans, stored before the test's clients start.
        writer = SpanWriter(running.owner.cursor())
        old_end = time.time_ns() - 60 * DAY_NS
        for _ in range(5):
            writer.write(flatten_request(_request(5, 200, old_end)))
        assert running.count() == 5_000
        schedule = RetentionSchedule(running.receivers.committer.run_in_writer, 30,
                                     str(running.owner.path), slice_traces=20)
        url = urlsplit(running.http_url)
        acknowledged: list[tuple[float, list[tuple[str, str]]]] = []
        failures: list[int] = []
        stop = threading.Event()

        def client() -> None:
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
            while not stop.is_set():
                request = _request(4, 8, time.time_ns())
                connection.request("POST", url.path, body=request.SerializeToString(),
                                   headers={"Content-Type": "application/x-protobuf"})
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    failures.append(response.status)
                    continue
                spans = request.resource_spans[0].scope_spans[0].spans
                acknowledged.append((time.monotonic(),
                                     [(s.trace_id.hex(), s.span_id.hex()) for s in spans]))
            connection.close()

        sender = threading.Thread(target=client)
        sender.start()
        try:
            started = time.monotonic()
            result = schedule.run_once()
            finished = time.monotonic()
        finally:
            stop.set()
            sender.join(60)
        assert result is not None and (result.traces, result.spans) == (1_000, 5_000)
        assert result.slices == 50
        during = [at for at, _ in acknowledged if started < at < finished]
        assert not failures, failures
        assert len(during) >= 2, (len(during), finished - started)  # commits between slices
        acked = [pair for _, spans in acknowledged for pair in spans]
        cursor = running.owner.cursor()
        try:
            cursor.execute("CREATE TEMP TABLE acked (trace_id VARCHAR, span_id VARCHAR)")
            cursor.executemany("INSERT INTO acked VALUES (?, ?)", acked)
            missing = cursor.execute("SELECT count(*) FROM acked ANTI JOIN spans "
                                     "USING (trace_id, span_id)").fetchone()[0]
            old_left = cursor.execute("SELECT count(*) FROM spans WHERE end_ns = ?",
                                      [old_end]).fetchone()[0]
        finally:
            cursor.close()
        assert missing == 0 and old_left == 0
        assert running.count() == len(acked)


@pytest.mark.parametrize("days", [0.5, 30])
def test_cutoff_is_now_minus_days(days: float) -> None:
    assert cutoff_for(days, NOW_S) == NOW_NS - int(days * DAY_NS)
