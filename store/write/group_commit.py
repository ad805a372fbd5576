"""One writer thread commits the batches of every request: group commit.

`GroupCommitter` is the front the receivers, retention and declared budgets use; each of its jobs
is a module of its own, where its measured reasons are written:

- commit_queue.py: admission with back-pressure (Overloaded, max lag) and what one commit takes
  (lingering for requests still being decoded);
- commit_loop.py: the writer thread, which commits and only then acknowledges;
- derive_thread.py: the second thread, on its own connection, that derives runs and steps after
  commits, outside the acknowledged transaction;
- derived_turns.py: writer tasks (retention) and derivation turns taking turns;
- commit_stats.py: what /metrics and /readyz read of the writer.

All of them beside this module, in store/write/.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

import duckdb

from store.derive.pending import Derive, PendingDerivations
from store.derive.scheduling import DERIVE_EVERY_SECONDS, pending_derivations
from store.lifecycle import Lifecycle
from store.rows.batch import FlatBatch
from store.write.commit_loop import CommitLoop, WriteFailed
from store.write.commit_queue import Closed, CommitQueue, Overloaded, WriterTask
from store.write.commit_stats import GroupCommitStats
from store.write.derive_thread import DerivationThread
from store.write.derived_turns import DerivedTableTurns
from store.write.writer import SpanWriter, WriteResult

__all__ = ["Closed", "GroupCommitStats", "GroupCommitter", "Overloaded", "WriteFailed"]


class GroupCommitter:
    """The single writer. Thread-safe `submit`; `close()` drains what was queued and stops."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        derive: Derive | None = None,
        derive_every_seconds: float = DERIVE_EVERY_SECONDS,
        root_grace_seconds: float | None = None,
        max_queued_spans: int = 200_000,
        max_transaction_spans: int = 50_000,
        max_lag_seconds: float = 5.0,
        retry_after_seconds: int = 2,
        linger_seconds: float = 0.05,
    ) -> None:
        self._queue = CommitQueue(
            max_queued_spans=max_queued_spans, max_transaction_spans=max_transaction_spans,
            max_lag_seconds=max_lag_seconds, retry_after_seconds=retry_after_seconds,
            linger_seconds=linger_seconds)
        self.stats = GroupCommitStats()
        self._turns = DerivedTableTurns()
        self._derivation = None if derive is None else DerivationThread(
            con, pending_derivations(derive, paced=True), self._turns, derive_every_seconds,
            root_grace_seconds)
        self._loop = CommitLoop(con, self._queue, self._turns, self.stats, self._derivation)
        self._loop.start()
        if self._derivation is not None:
            self._derivation.start()

    # The queue's limits that receivers read (their health checks and Retry-After); a test
    # sets retry_after_seconds. The others stay the queue's own.
    @property
    def max_queued_spans(self) -> int:
        return self._queue.max_queued_spans

    @property
    def max_lag_seconds(self) -> float:
        return self._queue.max_lag_seconds

    @property
    def retry_after_seconds(self) -> int:
        return self._queue.retry_after_seconds

    @retry_after_seconds.setter
    def retry_after_seconds(self, value: int) -> None:
        self._queue.retry_after_seconds = value

    @property
    def writer(self) -> SpanWriter:
        """Public for tests, which set its after_write hook (store/write/writer.py)."""
        return self._loop.writer

    @property
    def derivations(self) -> PendingDerivations | None:
        return None if self._derivation is None else self._derivation.derivations

    @property
    def derive_every_seconds(self) -> float:
        return DERIVE_EVERY_SECONDS if self._derivation is None else self._derivation.every_seconds

    @property
    def derivation_failed_traces(self) -> int:
        """Traces recorded in derivation_failures, as of the last derivation turn."""
        return 0 if self._derivation is None else self._derivation.failed_traces

    @property
    def traces_derived(self) -> int:
        """Traces derived by this writer's derivation thread since it started (a trace derived
        again counts again)."""
        return 0 if self._derivation is None else self._derivation.derivations.traces_derived

    @property
    def root_missing_runs(self) -> int:
        """Runs measured without their root (docs/conventions.md), as of the last derivation
        turn."""
        return 0 if self._derivation is None else self._derivation.root_missing_runs or 0

    @property
    def awaiting_root(self) -> int:
        """Traces with spans but no run, waiting for their root, as of the last turn."""
        return 0 if self._derivation is None else self._derivation.awaiting_root

    def decoding_started(self) -> None:
        """A request is being decoded and will submit soon (see CommitQueue.take's linger)."""
        self._queue.decoding_started()

    def decoding_finished(self) -> None:
        """Call after submit() (or after the request failed), once per decoding_started()."""
        self._queue.decoding_finished()

    def submit(self, batch: FlatBatch) -> Future[WriteResult]:
        """Queue a batch; its future resolves once it is committed. Raises Overloaded, Closed."""
        return self._queue.submit(batch)

    @property
    def queued_spans(self) -> int:
        return self._queue.queued_spans

    @property
    def oldest_queued_seconds(self) -> float:
        """How long the oldest queued batch has waited (0 when the queue is empty)."""
        return self._queue.oldest_queued_seconds

    @property
    def derivation_lag_seconds(self) -> float:
        """How long the oldest commit not yet derived has waited (0 when everything committed
        is derived, or when this writer does not derive). Commits of this process only: marks
        a previous process left are derived by the first turn but not timed here."""
        return 0.0 if self._derivation is None else self._derivation.lag_seconds

    @property
    def alive(self) -> bool:
        return self._loop.alive

    @property
    def threads(self) -> tuple[Lifecycle, ...]:
        """The owners of its threads, started when it was made: the writer's, then the
        derivation's when it derives. `close()` stops the writer, which stops the derivation
        once everything queued is committed."""
        return (self._loop,) if self._derivation is None else (self._loop, self._derivation)

    def run_in_writer(self, task: WriterTask) -> Future[Any]:
        """Run `task(connection)` on the writer thread between two commits; one task per turn,
        so that queued batches are committed between the slices of a long job (retention).
        The database keeps a single writer. Raises Closed."""
        return self._queue.add_task(task)

    def request_derivation(self) -> None:
        """Ask for a derivation turn soon (after a writer task marked traces pending)."""
        if self._derivation is not None:
            self._derivation.request()

    def derivation_ticket(self) -> int:
        """Inside a writer task (run_in_writer): the number of the first derivation turn that
        will see what the task commits; pass it to wait_for_derivation."""
        return self._turns.ticket()

    def wait_for_derivation(self, ticket: int, timeout: float) -> bool:
        """Wait until the turn `ticket` (or a later one) has finished without error; False on
        timeout, or when this writer does not derive."""
        if self._derivation is None:
            return False
        return self._turns.wait(ticket, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Refuse new batches, commit every queued one, stop the thread. True when drained."""
        self._loop.stop()
        began = time.monotonic()
        self._loop.join(timeout)
        if self._derivation is not None:
            # Its last turn derives everything the writer committed.
            left = None if timeout is None else max(timeout - (time.monotonic() - began), 0)
            if not self._derivation.join(left):
                return False
        return not self._loop.alive
