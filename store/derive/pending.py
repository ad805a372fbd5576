"""Derived tables (runs, steps) catching up with stored spans, outside the acknowledged write.

The writer marks every trace it stores spans of in `pending_derivations`, in the spans'
transaction. `PendingDerivations.run` takes the marked traces in slices and, for each slice,
calls the derivation (statements.py's refresh_touched; scheduling.py says when; tests hand
GroupCommitter another) with the temp table `touched_traces(trace_id, since)`, and
removes the marks, in one transaction. A crash at any point leaves the marks of whatever was
not derived, and the next run derives it: nothing acknowledged is ever left underived.

A derivation failure is confined to the traces that caused it (once, one span with a
deadline in microseconds overflowed the derivation's arithmetic, and from then on no trace of
the file was derived and every command failed on it). When a slice fails because of what it
holds (a DuckDB data or query error), it is bisected: each half is derived in its own
transaction, the half that fails is split again, and a single trace that still fails alone is
recorded in `derivation_failures` with its error and its marks removed. Every other trace of the
slice is derived. New spans of a failed trace mark it again, and it is retried then. Errors of
the environment (I/O, out of memory, a write conflict, an interrupt) say nothing about the
traces: they are raised, the slice stays marked, and the caller retries it later.

A change of a declared budget (docs/guide.md#declaring-budgets) marks the traces it affects in
`pending_measurements` instead: only B changed, so `remeasure` (statements.py's remeasure_touched,
which scheduling.py pairs with the derivation for every trigger) measures their stored runs and
steps again without recognising their spans, after the full derivations of the turn. A trace marked
both ways is derived in full, which clears both marks. Without `remeasure`, or when a slice of them
fails, those traces are derived in full.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from store.file.sql_files import load_queries
from store.prices.bundled import check_version

# The name it had before the store had rooms: log configurations and tests filter on it.
_LOG = logging.getLogger("store.derivation")
Derive = Callable[[duckdb.DuckDBPyConnection], None]
# The marks' SQL, in sql/pending/ (scheduling.py runs mark_rootless_due of it).
PENDING_FOLDER = Path(__file__).with_name("sql") / "pending"
PENDING_NAMES = frozenset({
    "take_pending_derivations", "isolate_pending_derivations", "clear_pending_derivations",
    "take_pending_measurements", "measure_in_full", "clear_derivation_failures",
    "record_derivation_failure", "mark_rootless_due", "any_large_pending",
    "any_measurements_pending"})
PENDING_QUERIES = load_queries(PENDING_FOLDER, PENDING_NAMES)


def _sql(name: str) -> str:
    return PENDING_QUERIES[name].text


_TAKE_SLICE = _sql("take_pending_derivations")
_ISOLATE = _sql("isolate_pending_derivations")
_CLEAR_SLICE = _sql("clear_pending_derivations")
_TAKE_MEASUREMENTS = _sql("take_pending_measurements")
_CLEAR_MEASUREMENTS = ("DELETE FROM pending_measurements "
                       "WHERE trace_id IN (SELECT trace_id FROM touched_traces)")
_MEASURE_IN_FULL = _sql("measure_in_full")
_CLEAR_FAILURES = _sql("clear_derivation_failures")
_RECORD_FAILURE = _sql("record_derivation_failure")
_COUNT_FAILURES = "SELECT count(*) FROM derivation_failures"
_ANY_LARGE = _sql("any_large_pending")
_ANY_MEASUREMENTS = _sql("any_measurements_pending")

# Errors that come from the environment, not from the traces being derived: bisecting would
# blame healthy traces for a full disk.
ENVIRONMENT_ERRORS: tuple[type[BaseException], ...] = (
    duckdb.OperationalError,  # I/O, out of memory, connection, transaction conflict
    duckdb.FatalException, duckdb.InterruptException, duckdb.PermissionException,
)
_ERROR_CHARS = 500
# A trace of this many spans or more (at its last derivation) is derived in a transaction of its
# own when paced, one per run, after the smaller ones (PendingDerivations). Deriving 10,000 spans
# takes ~0.3 s here, so a small trace waits at most about that for a large one.
LARGE_TRACE_SPANS = 10_000
_ANY_SIZE = 2**62
# How many times an unpaced run goes round while its own derivations left traces marked.
FOLLOW_UP_ROUNDS = 3


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back after a failure, keeping the failure's own error: when the COMMIT itself
    failed (a full disk), DuckDB has already ended the transaction, and ROLLBACK would raise
    "cannot rollback - no transaction is active" in place of the cause."""
    with contextlib.suppress(duckdb.Error):
        con.rollback()


def _caused_by_the_traces(error: BaseException) -> bool:
    return isinstance(error, duckdb.Error) and not isinstance(error, ENVIRONMENT_ERRORS)


def describe(error: BaseException) -> str:
    lines = str(error).strip().splitlines() or [type(error).__name__]
    return lines[0][:_ERROR_CHARS]


class PendingDerivations:
    """Runs the derivation over the marked traces, `slice_traces` at a time.

    `max_isolation_attempts` bounds the derivations one failing slice may cost in a run (each
    costs the derivation's fixed ~150 ms): a slice of 20,000 traces with one bad trace takes
    about 2 × 15; past the bound the error is raised and the rest of the slice, still marked,
    is isolated on the next run.

    `paced` (serve's derivation thread): a run derives the traces under LARGE_TRACE_SPANS
    first, in slices, then at most one large trace, in a transaction of its own, so that one
    large trace never holds the others back for long; and a trace derived before waits a pause
    that grows with its size before it is derived again (take_pending_derivations.sql). What is
    left stays marked for the next run. Unpaced (bulk loads, catch-up, a declared budget's
    change), a run derives every marked trace."""

    def __init__(self, derive: Derive, slice_traces: int = 20_000,
                 max_isolation_attempts: int = 200, remeasure: Derive | None = None,
                 paced: bool = False) -> None:
        self.derive = derive
        self.remeasure = remeasure
        self.slice_traces = slice_traces
        self.max_isolation_attempts = max_isolation_attempts
        self.paced = paced
        self.traces_derived = 0
        self.traces_failed = 0  # recorded in derivation_failures by this object
        self.seconds = 0.0
        # what the next slice takes: {at_least, below, slice, paced}
        self._take: dict[str, object] = {}
        self._bundled_checked = False

    @staticmethod
    def count(con: duckdb.DuckDBPyConnection) -> int:
        """How many traces are marked (a trace marked by several writes counts once)."""
        rows = con.execute("SELECT count(DISTINCT trace_id) FROM (SELECT trace_id FROM "
                           "pending_derivations UNION ALL SELECT trace_id FROM "
                           "pending_measurements)").fetchall()  # all: no result left open
        return int(rows[0][0]) if rows else 0

    @staticmethod
    def failed(con: duckdb.DuckDBPyConnection) -> int:
        """How many traces are recorded as failing to derive."""
        row = con.execute(_COUNT_FAILURES).fetchone()
        return int(row[0]) if row else 0

    def run(self, con: duckdb.DuckDBPyConnection) -> int:
        """Derive the marked traces (every one, or when paced what the pace allows); returns
        how many were derived. A trace that fails alone is recorded (module docstring);
        raises an error of the environment, or one that the bounded isolation could not pin
        down (what is not derived stays marked)."""
        started = time.perf_counter()
        derived = 0
        rounds = 0
        if not self._bundled_checked:
            # a bundled price table of another version re-measures the runs it priced
            # (store/prices/bundled.py): once for each runner, before its first turn
            check_version(con)
            self._bundled_checked = True
        try:
            while True:
                rounds += 1
                if self.paced:
                    derived += self._derive_slices(con, 0, LARGE_TRACE_SPANS,
                                                   self.slice_traces)
                    if self._any(con, _ANY_LARGE, [LARGE_TRACE_SPANS]):
                        derived += self._derive_slices(con, LARGE_TRACE_SPANS, _ANY_SIZE, 1,
                                                       once=True)
                else:
                    derived += self._derive_slices(con, 0, _ANY_SIZE, self.slice_traces)
                measured, in_full = self._measure(con)
                derived += measured
                # Unpaced, a derivation that marked other traces again (docs/conventions.md: a model
                # step's name that other traces' unnamed steps take changed) derives them too,
                # a bounded number of rounds: their own derivation marks nothing further
                # (derive_refresh.sql, 1d). Paced, serve's next turn takes them.
                again = not self.paced and rounds < FOLLOW_UP_ROUNDS and self.count(con) > 0
                if not in_full and not again:
                    break
        finally:
            self.traces_derived += derived
            self.seconds += time.perf_counter() - started
        return derived

    def _derive_slices(self, con: duckdb.DuckDBPyConnection, at_least: int, below: int,
                       slice_traces: int, once: bool = False) -> int:
        """Derive slices of the marked traces of that size, until none is left (or one slice
        when `once`); returns how many traces were derived."""
        self._take = {"at_least": at_least, "below": below, "slice": slice_traces,
                      "paced": self.paced}
        derived = 0
        while True:
            taken, error = self._derive_slice(con)
            if error is not None:
                traces = self._slice_traces(con)
                derived += self._isolate(con, traces, error)
                taken = len(traces)
            else:
                derived += taken
            if once or taken < slice_traces:
                return derived

    def _derive_slice(self, con: duckdb.DuckDBPyConnection) -> tuple[int, BaseException | None]:
        """Derive the next slice; (traces taken, None), or (0, the error) when it failed
        because of the traces in it (rolled back; an error of the environment is raised)."""
        con.begin()
        try:
            con.execute(_TAKE_SLICE, self._take)
            taken = self._touched(con)
            if taken:
                self._derive_touched(con)
            con.commit()
        except BaseException as error:
            _rollback(con)
            if not _caused_by_the_traces(error):
                raise
            return 0, error
        return taken, None

    def _measure(self, con: duckdb.DuckDBPyConnection) -> tuple[int, bool]:
        """Measure the traces marked in pending_measurements again, a slice at a time;
        (traces measured, whether some were marked for the full derivation instead)."""
        measured = 0
        if not self._any(con, _ANY_MEASUREMENTS):
            return 0, False
        while True:
            con.begin()
            try:
                con.execute(_TAKE_MEASUREMENTS, [self.slice_traces])
                taken = self._touched(con)
                if taken:
                    (self.remeasure or self.derive)(con)
                    con.execute(_CLEAR_SLICE if self.remeasure is None else _CLEAR_MEASUREMENTS)
                con.commit()
            except BaseException as error:
                _rollback(con)
                if not _caused_by_the_traces(error):
                    raise
                # the full derivation confines the trace that fails (module docstring)
                con.begin()
                try:
                    con.execute(_TAKE_MEASUREMENTS, [self.slice_traces])
                    con.execute(_MEASURE_IN_FULL)
                    con.commit()
                except BaseException:
                    _rollback(con)
                    raise
                return measured, True
            measured += taken
            if taken < self.slice_traces:
                return measured, False

    def _derive_touched(self, con: duckdb.DuckDBPyConnection) -> None:
        self.derive(con)
        con.execute(_CLEAR_SLICE)
        con.execute(_CLEAR_FAILURES)

    @staticmethod
    def _any(con: duckdb.DuckDBPyConnection, sql: str, parameters: list | None = None) -> bool:
        """Whether a pass may take anything (any_large_pending.sql, any_measurements_pending.sql:
        a pass that takes nothing costs ~1.8 ms, the question ~0.3)."""
        rows = con.execute(sql, parameters).fetchall()
        return bool(rows[0][0]) if rows else True

    @staticmethod
    def _touched(con: duckdb.DuckDBPyConnection) -> int:
        row = con.execute("SELECT count(*) FROM touched_traces").fetchone()
        return int(row[0]) if row else 0

    def _slice_traces(self, con: duckdb.DuckDBPyConnection) -> list[tuple[str, Any]]:
        """The slice that just failed, taken again (the marks are unchanged by the rollback)."""
        con.begin()
        try:
            con.execute(_TAKE_SLICE, self._take)
            rows = con.execute("SELECT trace_id, since FROM touched_traces").fetchall()
        finally:
            _rollback(con)
        return [(str(trace_id), since) for trace_id, since in rows]

    def _derive_part(self, con: duckdb.DuckDBPyConnection, part: list[tuple[str, Any]]
                     ) -> BaseException | None:
        con.begin()
        try:
            con.execute(_ISOLATE, [[t for t, _ in part], [since for _, since in part]])
            self._derive_touched(con)
            con.commit()
        except BaseException as error:
            _rollback(con)
            if not _caused_by_the_traces(error):
                raise
            return error
        return None

    def _record_failure(self, con: duckdb.DuckDBPyConnection, trace: tuple[str, Any],
                        error: BaseException) -> None:
        message = describe(error)
        con.begin()
        try:
            con.execute(_ISOLATE, [[trace[0]], [trace[1]]])
            con.execute(_RECORD_FAILURE, [trace[0], message])
            con.execute(_CLEAR_SLICE)
            con.commit()
        except BaseException:
            _rollback(con)
            raise
        self.traces_failed += 1
        _LOG.error("trace %s cannot be derived (its runs and steps stay as last derived): %s",
                   trace[0], message, extra={"event": "derivation_failed", "trace_id": trace[0],
                                   "error": message})

    def _isolate(self, con: duckdb.DuckDBPyConnection, traces: list[tuple[str, Any]],
                 error: BaseException) -> int:
        """Bisect a failing slice: derive what derives, record the traces that fail alone.
        Returns how many traces were derived.

        A failing part is split and its left half derived. When the left half derives, the
        failure is in the right half, which is split in turn without being derived whole; when
        the left half fails too, the right half is set aside, and everything set aside is
        derived together once the failing halves are resolved (and bisected again if that
        fails). A single trace is recorded only once it has failed on its own. One bad trace
        among 20,000 costs ~16 derivations this way (a plain bisection derives both halves of
        every split: ~30; each derivation has a fixed cost of ~0.5 s here)."""
        derived = 0
        attempts = 0

        def attempt(part: list[tuple[str, Any]]) -> BaseException | None:
            nonlocal attempts, derived
            attempts += 1
            if attempts > self.max_isolation_attempts:
                raise error
            failure = self._derive_part(con, part)
            if failure is None:
                derived += len(part)
            return failure

        # (traces, the error they are known to fail with, whether it was seen on them alone)
        failing: list[tuple[list[tuple[str, Any]], BaseException, bool]] = [(traces, error, True)]
        set_aside: list[tuple[str, Any]] = []
        while failing:
            while failing:
                part, part_error, seen = failing.pop()
                if len(part) == 1:
                    failure = part_error if seen else attempt(part)
                    if failure is not None:
                        self._record_failure(con, part[0], failure)
                    continue
                middle = len(part) // 2
                left, right = part[:middle], part[middle:]
                left_error = attempt(left)
                if left_error is None:
                    failing.append((right, part_error, False))
                else:
                    set_aside.extend(right)
                    failing.append((left, left_error, True))
            if set_aside:
                rest, set_aside = set_aside, []
                rest_error = attempt(rest)
                if rest_error is not None:
                    failing.append((rest, rest_error, True))
        return derived
