"""The writer thread of group commit: one transaction for the batches of many requests.

Receivers decode and flatten in their own threads, then submit the batch (commit_queue.py) and
wait on its future. This thread takes everything queued (up to `max_transaction_spans`),
merges it into one FlatBatch and commits it with one `SpanWriter.write`, then resolves every
future. A request is answered with success only after that commit returned, so an acknowledged
span is on disk (DuckDB fsyncs its WAL on commit) and survives kill -9. A failed write (disk
full, an I/O error) fails the requests in it; they are never acknowledged.

Between two commits it runs one writer task (retention), so that queued batches are committed
between the slices of a long job; the database keeps a single writer.
"""

from __future__ import annotations

import logging
import threading
import time

import duckdb

from store.lifecycle import joined
from store.rows.batch import FlatBatch
from store.write.commit_queue import CommitQueue, Pending
from store.write.commit_stats import GroupCommitStats
from store.write.derive_thread import DerivationThread
from store.write.derived_turns import DerivedTableTurns
from store.write.writer import SpanWriter, to_arrow

# The name it had before the store had rooms: log configurations and tests filter on it.
_LOG = logging.getLogger("store.commit_loop")


class WriteFailed(RuntimeError):
    """The transaction holding this batch failed; nothing of it was acknowledged."""


class CommitLoop:
    """The writer thread (store/lifecycle.py's shape): `stop()` closes the queue, and the thread
    ends once it has committed everything queued and the derivation has been asked for its last
    turn."""

    def __init__(self, con: duckdb.DuckDBPyConnection, queue: CommitQueue,
                 turns: DerivedTableTurns, stats: GroupCommitStats,
                 derivation: DerivationThread | None) -> None:
        self.writer = SpanWriter(con)
        # The first Arrow conversion in a process pays pyarrow's lazy set-up (4.2 s measured on
        # this 2-core machine); pay it here, at start-up, rather than in the first request.
        to_arrow(FlatBatch())
        self._con = con
        self._queue = queue
        self._turns = turns
        self._stats = stats
        self._derivation = derivation
        self._thread = threading.Thread(target=self._run, name="budgetscope-writer", daemon=True)

    @property
    def name(self) -> str:
        return self._thread.name

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Refuse new batches and tasks; what is queued is still committed."""
        self._queue.close()

    def join(self, timeout: float | None = None) -> bool:
        return joined(self._thread, timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while True:
            self._run_task()
            taken = self._queue.take()
            if taken is None:
                self._queue.refuse_tasks()
                if self._derivation is not None:
                    self._derivation.stop()  # its last turn derives what was committed
                return
            if taken:
                self._commit(taken)

    def _run_task(self) -> None:
        queued = self._queue.next_task()
        if queued is None:
            return
        task, future = queued
        if not future.set_running_or_notify_cancel():
            return
        try:
            with self._turns.writer_task():
                result = task(self._con)
            future.set_result(result)
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits on it
            future.set_exception(error)

    def _commit(self, taken: list[Pending]) -> None:
        if len(taken) == 1:
            merged = taken[0].batch
        else:
            merged = FlatBatch()
            for pending in taken:
                merged.extend(pending.batch)
        started = time.monotonic()
        waited = sum(started - pending.queued_at for pending in taken)
        try:
            result = self.writer.write(merged)
        except Exception as error:  # noqa: BLE001 - any failure must fail the requests, not the thread
            self._stats.failed_transactions += 1
            if len(taken) > 1:
                # One bad batch must not fail its neighbours: retry each alone.
                _LOG.warning("group commit of %d requests failed (%s); retrying one by one",
                             len(taken), error)
                for pending in taken:
                    self._commit([pending])
                return
            _LOG.error("write failed, request not acknowledged: %s", error)
            self._stats.refused(error)
            taken[0].future.set_exception(WriteFailed(f"could not store the spans: {error}"))
            return
        committed_at = self._stats.committed(requests=len(taken), spans_written=merged.span_count,
                                             result=result, started=started, waited=waited)
        if self._derivation is not None:
            self._derivation.committed(committed_at)
        # Only now, after the commit returned: an acknowledged span is on disk.
        for pending in taken:
            pending.future.set_result(result)
