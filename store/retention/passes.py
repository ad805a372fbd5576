"""Retention: remove traces older than N days, whole, and give their space back to the file.

A trace is old when its newest span ended before the cutoff (now − N days); see
sql/retention_expired.sql for why the newest span and not the run's start. Removing it removes
every span of it, its derived runs, steps and reconcile links, its arrival time and its pending
derivation mark, and afterwards the resources and scopes no span uses any more.

The work is cut into slices of `slice_traces` traces, one transaction each (a slice's commit
costs a mostly fixed 160-240 ms here: 500 traces of 5 spans take ~300 ms, 2 000 ~1 s; see
bench/bench_retention.py), so that inside
`budgetscope serve` the single writer commits the receivers' batches between two slices
(`GroupCommitter.run_in_writer`): acknowledged ingestion goes on while retention runs, and the
database keeps one writer. `budgetscope retain` runs the same passes on a file nobody serves.

Space: after a pass that removed something, CHECKPOINT writes the tables without the deleted rows
and marks their blocks free. DuckDB 2.0 does not compact the file: it reuses the freed blocks
for new data, and gives bytes back only when free blocks sit at the file's end. Measured (bench/
bench_retention.py, 100k spans 100 days old + 100k new): 42.5 MB → 44.1 MB after retention, and
43.8 MB after 100k more new spans, where the same file without retention grew to 63.5 MB. So a
file under retention stops growing rather than shrinking (tests/store/test_retention.py checks
this).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from store.file.sql_files import load_queries
from store.lifecycle import joined
from store.write.writer import rows_deleted

_LOG = logging.getLogger("budgetscope.retention")
RETENTION_FOLDER = Path(__file__).with_name("sql")
RETENTION_QUERIES = load_queries(RETENTION_FOLDER, frozenset({
    "retention_expired", "retention_take_slice", "retention_delete_slice", "retention_orphans",
    "retention_loose_log_records"}))
_EXPIRED = RETENTION_QUERIES["retention_expired"].text
_TAKE_SLICE = RETENTION_QUERIES["retention_take_slice"].text
_DELETE_SLICE = RETENTION_QUERIES["retention_delete_slice"].text
_ORPHANS = RETENTION_QUERIES["retention_orphans"].text
_LOOSE_LOGS = RETENTION_QUERIES["retention_loose_log_records"].text
DAY_NS = 86_400 * 10**9


@dataclass
class RetentionResult:
    cutoff_ns: int
    traces: int = 0
    spans: int = 0
    resources: int = 0
    scopes: int = 0
    slices: int = 0
    seconds: float = 0.0
    file_bytes_before: int | None = None
    file_bytes_after: int | None = None
    checkpoint_error: str | None = None


def file_bytes(path: str | os.PathLike[str] | None) -> int | None:
    """Size of the database file plus its write-ahead log (None for an in-memory database)."""
    if path is None:
        return None
    total = 0
    for name in (str(path), f"{path}.wal"):
        with contextlib.suppress(OSError):
            total += os.path.getsize(name)
    return total


def cutoff_for(days: float, now: float | None = None) -> int:
    """Epoch ns before which a trace's newest span must have ended for it to be removed."""
    now_ns = int((time.time() if now is None else now) * 10**9)
    return now_ns - int(days * DAY_NS)


class RetentionPass:
    """One pass, step by step: `begin`, `next_slice` until it returns False, `finish`."""

    def __init__(self, cutoff_ns: int, path: str | None, slice_traces: int = 2_000) -> None:
        if slice_traces < 1:
            raise ValueError("slice_traces must be at least 1")
        self.result = RetentionResult(cutoff_ns)
        self.path = path
        self.slice_traces = slice_traces
        self._started = time.perf_counter()

    def begin(self, con: duckdb.DuckDBPyConnection) -> int:
        """Find the expired traces; returns how many."""
        self.result.file_bytes_before = file_bytes(self.path)
        con.execute(_EXPIRED, {"cutoff_ns": self.result.cutoff_ns})
        row = con.execute("SELECT count(*) FROM retention_expired").fetchone()
        return int(row[0]) if row else 0

    def next_slice(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Remove the next slice of expired traces in one transaction; False when none is left."""
        con.begin()
        try:
            con.execute(_TAKE_SLICE, {"slice_traces": self.slice_traces,
                                      "cutoff_ns": self.result.cutoff_ns})
            row = con.execute("SELECT count(*), count(*) FILTER (WHERE expired) "
                              "FROM retention_slice").fetchone()
            taken, expired = (int(row[0]), int(row[1])) if row else (0, 0)
            spans = 0
            if taken:
                deleted = con.execute(_DELETE_SLICE).fetchone()
                spans = int(deleted[0]) if deleted else 0
            con.commit()
        except BaseException:
            con.rollback()
            raise
        self.result.traces += expired
        self.result.spans += spans
        self.result.slices += bool(taken)
        return taken > 0

    def finish(self, con: duckdb.DuckDBPyConnection) -> RetentionResult:
        """Drop log records of no trace older than the cutoff, then orphaned resources and
        scopes; CHECKPOINT when anything was removed."""
        row = con.execute(_LOOSE_LOGS, {"cutoff_ns": self.result.cutoff_ns}).fetchone()
        loose_logs = int(row[0]) if row else 0
        if self.result.traces or loose_logs:
            con.begin()
            try:
                before = _counts(con)
                con.execute(_ORPHANS)
                after = _counts(con)
                con.commit()
                # After the commit: a write that begins from here on inserts its resources and
                # scopes again; one that began earlier forgets at its next write.
                rows_deleted()
            except BaseException:
                con.rollback()
                raise
            self.result.resources = before[0] - after[0]
            self.result.scopes = before[1] - after[1]
            try:
                con.execute("CHECKPOINT")
            except duckdb.Error as error:
                # A reader's open transaction can hold the checkpoint off; DuckDB's automatic
                # checkpoint (WAL over 16 MB) or the next pass does it instead.
                self.result.checkpoint_error = str(error)
        con.execute("DROP TABLE IF EXISTS retention_expired")
        con.execute("DROP TABLE IF EXISTS retention_slice")
        self.result.file_bytes_after = file_bytes(self.path)
        self.result.seconds = time.perf_counter() - self._started
        return self.result


def _counts(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    row = con.execute("SELECT (SELECT count(*) FROM resources), (SELECT count(*) FROM scopes)"
                      ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def retain(con: duckdb.DuckDBPyConnection, days: float, path: str | None, *,
           now: float | None = None, slice_traces: int = 2_000) -> RetentionResult:
    """One whole pass on a connection this caller owns (`budgetscope retain`)."""
    work = RetentionPass(cutoff_for(days, now), path, slice_traces)
    work.begin(con)
    while work.next_slice(con):
        pass
    result = work.finish(con)
    log_result(result, days)
    return result


def log_result(result: RetentionResult, days: float) -> None:
    _LOG.info(
        "retention removed %d traces (%d spans) older than %g days in %.2f s; file %s → %s bytes",
        result.traces, result.spans, days, result.seconds, result.file_bytes_before,
        result.file_bytes_after,
        extra={"event": "retention", "retention_days": days, "cutoff_ns": result.cutoff_ns,
               "traces": result.traces, "spans": result.spans, "resources": result.resources,
               "scopes": result.scopes, "slices": result.slices,
               "seconds": round(result.seconds, 3),
               "file_bytes_before": result.file_bytes_before,
               "file_bytes_after": result.file_bytes_after,
               "checkpoint_error": result.checkpoint_error})


RunInWriter = Callable[[Callable[[duckdb.DuckDBPyConnection], Any]], "Future[Any]"]


class RetentionSchedule:
    """Inside `budgetscope serve`: a pass at start-up and every `interval` seconds, each step
    handed to the single writer (`run_in_writer`), so that commits interleave with the slices.

    Small slices put ingestion first: with 2 clients posting 100-span requests during a pass
    over 100k old spans, 250-trace slices kept 620 spans/s flowing (p50 262 ms) where 1 000-
    trace ones let 240 spans/s through (p50 769 ms); the pass took 26 s instead of 19 s
    (bench/bench_retention_ingest.py, loaded 2-core machine).

    store/lifecycle.py's shape: `stop()` ends it between two slices."""

    def __init__(self, run_in_writer: RunInWriter, days: float, path: str | None, *,
                 interval: float = 3_600.0, slice_traces: int = 250) -> None:
        self.run_in_writer = run_in_writer
        self.days = days
        self.path = path
        self.interval = interval
        self.slice_traces = slice_traces
        self.passes = 0
        self.traces_removed = 0
        self.spans_removed = 0
        self.last: RetentionResult | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="budgetscope-retention",
                                        daemon=True)

    @property
    def name(self) -> str:
        return self._thread.name

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End between two slices (a slice in progress finishes: it is one transaction)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        return joined(self._thread, timeout)

    def run_once(self) -> RetentionResult | None:
        """One pass through the writer; None when stopped before it finished."""
        work = RetentionPass(cutoff_for(self.days), self.path, self.slice_traces)
        self._in_writer(work.begin)
        while not self._stop.is_set():
            if not self._in_writer(work.next_slice):
                break
        result: RetentionResult = self._in_writer(work.finish)
        self.passes += 1
        self.traces_removed += result.traces
        self.spans_removed += result.spans
        self.last = result
        log_result(result, self.days)
        return result

    def _in_writer(self, step: Callable[[duckdb.DuckDBPyConnection], Any]) -> Any:
        return self.run_in_writer(step).result()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as error:  # noqa: BLE001 - Closed at shutdown, or a failed slice
                if self._stop.is_set():
                    return
                _LOG.error("retention pass failed (retried next interval): %s", error,
                           extra={"event": "retention_failed", "error": str(error)})
            self._stop.wait(self.interval)
