"""The second thread of the group-commit writer: it derives runs and steps after commits.

The derived runs and steps are not part of the acknowledged transaction (they cost ~175 ms per
transaction whatever its size, measured): this thread, on its own connection to the same
database, derives the traces marked pending after each commit (at most every
`every_seconds`), so the dashboard sees a new run within about a second, and a crash
leaves the marks for the next start (store/derive/pending.py). It runs beside the writer, not
between its commits: on the writer's thread it held commits back ~30% of the time (requests
queued 64-74 ms on average for it, p99 0.6-1.2 s), while the process used about one of the two
cores. DuckDB lets the two transactions overlap: the writer only appends (spans, keys, marks)
and the derivation only reads spans and deletes the marks it saw (store/file/schema/pending.sql).
Writer tasks (retention) rewrite the derived tables too, so they and the derivation take turns
(derived_turns.py).

A trace whose derivation fails is confined to itself (store/derive/pending.py): it is recorded in
derivation_failures, every other trace is still derived, and the count shows in /metrics and
/readyz (`failed_traces`, refreshed after each derivation turn).
"""

from __future__ import annotations

import logging
import threading
import time

import duckdb

from store.derive.pending import PendingDerivations
from store.derive.scheduling import measure_rootless, rootless_counts, rootless_due
from store.lifecycle import joined
from store.write.derived_turns import DerivedTableTurns

# The name it had before the store had rooms: log configurations and tests filter on it.
_LOG = logging.getLogger("store.derive_thread")


class DerivationThread:
    """store/lifecycle.py's shape: `stop()` (the writer calls it once closed and drained) asks
    for one last turn, which derives the rest; the thread ends after it."""

    def __init__(self, writer_con: duckdb.DuckDBPyConnection, derivations: PendingDerivations,
                 turns: DerivedTableTurns, every_seconds: float,
                 root_grace_seconds: float | None = None) -> None:
        """`root_grace_seconds`: traces whose root has not arrived are measured from their earliest
        span once none of their spans has arrived for that long (docs/conventions.md); the thread
        then also wakes on its own to look for them, a fifth of the grace at most apart (between 1
        and 30 s). None: never."""
        self.derivations = derivations
        self.every_seconds = every_seconds
        self.root_grace_seconds = root_grace_seconds
        self._check_seconds = (None if root_grace_seconds is None
                               else min(30.0, max(1.0, root_grace_seconds / 5)))
        # Runs measured without their root, and traces still waiting for theirs, as of the
        # last turn (for /metrics and the log).
        self.root_missing_runs: int | None = None
        self.awaiting_root = 0
        self._turns = turns
        # Traces recorded in derivation_failures, as of the last derivation turn.
        self.failed_traces = 0
        # Set after each commit; set at start too, since marks may be left by a previous process.
        self._wanted = threading.Event()
        self._wanted.set()
        self._writer_done = threading.Event()
        # When the oldest commit no finished turn has covered was made (None: all derived),
        # for /metrics' derivation lag; written by both threads under its lock.
        self._oldest_underived: float | None = None
        self._underived_lock = threading.Lock()
        # Its own connection: a cursor of the writer's is a second connection to the same
        # database, so that the turn's transaction runs beside the writer's commits.
        self._thread = threading.Thread(target=self._loop, args=(writer_con.cursor(),),
                                        name="budgetscope-derive", daemon=True)

    @property
    def name(self) -> str:
        return self._thread.name

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """The writer is closed and drained: one last turn derives the rest."""
        self._writer_done.set()
        self._wanted.set()

    def join(self, timeout: float | None = None) -> bool:
        return joined(self._thread, timeout)

    def committed(self, at: float) -> None:
        """The writer committed at `at` (time.monotonic()): derive it in a turn soon."""
        with self._underived_lock:
            if self._oldest_underived is None:
                self._oldest_underived = at
        self._wanted.set()

    def request(self) -> None:
        """Ask for a turn soon (after a writer task marked traces pending)."""
        self._wanted.set()

    @property
    def lag_seconds(self) -> float:
        """How long the oldest commit not yet derived has waited (0 when all are derived)."""
        with self._underived_lock:
            oldest = self._oldest_underived
        return 0.0 if oldest is None else time.monotonic() - oldest

    def _loop(self, con: duckdb.DuckDBPyConnection) -> None:
        """A turn after commits, at most every every_seconds, and a last one once the writer
        has stopped."""
        last_turn = time.monotonic() - self.every_seconds
        try:
            while True:
                if not self._wanted.wait(self._check_seconds) and not self._rootless_due(con):
                    continue
                # Let the turn gather the commits of every_seconds, unless closing.
                self._writer_done.wait(last_turn + self.every_seconds - time.monotonic())
                self._wanted.clear()
                last = self._writer_done.is_set()  # read before the turn: it must see it all
                last_turn = time.monotonic()
                self._turn(con)
                if last:
                    return
        finally:
            con.close()

    def _rootless_due(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Whether a trace waits for its root longer than the grace period (a cheap look at a
        small table, made when no commit woke the thread)."""
        if self.root_grace_seconds is None:
            return False
        try:
            return rootless_due(con, self.root_grace_seconds)
        except duckdb.Error:
            return False  # the next commit's turn looks again

    def _count_rootless(self, con: duckdb.DuckDBPyConnection) -> None:
        waiting, measured = rootless_counts(con)
        self.awaiting_root = waiting
        before, self.root_missing_runs = self.root_missing_runs, measured
        if before is not None and measured > before:
            _LOG.info("%d more run(s) measured from their earliest span: their root span never "
                      "arrived (root_missing)", measured - before,
                      extra={"event": "rootless_measured", "runs": measured - before})

    def _turn(self, con: duckdb.DuckDBPyConnection) -> None:
        # This turn covers every commit made before it begins (a commit from now on marks
        # itself underived again, even if the turn's snapshot happens to hold it).
        with self._underived_lock:
            covered, self._oldest_underived = self._oldest_underived, None
        try:
            with self._turns.derivation_turn():
                if self.root_grace_seconds is None:
                    self.derivations.run(con)
                else:
                    measure_rootless(con, self.root_grace_seconds, self.derivations)
                    self._count_rootless(con)
                self.failed_traces = self.derivations.failed(con)
                # a paced turn may leave marks (a large trace's pause, the next large trace):
                # another turn comes after every_seconds
                if PendingDerivations.count(con):
                    self._wanted.set()
        except Exception as error:  # noqa: BLE001 - the marks stay; retried next turn
            _LOG.error("deriving runs and steps failed (will retry): %s", error)
            with self._underived_lock:
                if covered is not None:
                    self._oldest_underived = min(covered, self._oldest_underived or covered)
            self._wanted.set()
