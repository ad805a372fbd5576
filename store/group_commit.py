"""One writer thread commits the batches of every request: group commit.

Receivers decode and flatten in their own threads, then `submit()` the batch and wait on its
future. The writer thread takes everything queued (up to `max_transaction_spans`), merges it into
one FlatBatch and commits it with one `SpanWriter.write`, then resolves every future. A request
is answered with success only after that commit returned, so an acknowledged span is on disk
(DuckDB fsyncs its WAL on commit) and survives kill -9.

Throughput comes from batching: a DuckDB transaction has a mostly fixed cost (statement set-up,
WAL fsync) that one 512-span request would pay alone. While
one transaction runs the next requests queue up and share the following one, and the writer
lingers briefly (at most `linger_seconds`) while other requests are still being decoded, so that
they join the same commit instead of paying for another.

The derived runs and steps are not part of the acknowledged transaction (they cost ~175 ms per
transaction whatever its size, measured): a second thread, on its own connection to the same
database, derives the traces marked pending after each commit (at most every
`derive_every_seconds`), so the dashboard sees a new run within about a second, and a crash
leaves the marks for the next start (store/derivation.py). It runs beside the writer, not
between its commits: on the writer's thread it held commits back ~30% of the time (requests
queued 64-74 ms on average for it, p99 0.6-1.2 s), while the process used about one of the two
cores. DuckDB lets the two transactions overlap: the writer only appends (spans, keys, marks)
and the derivation only reads spans and deletes the marks it saw (schema/pending.sql).
Writer tasks (retention) rewrite the derived tables too, so they and the derivation take turns.

A trace whose derivation fails is confined to itself (store/derivation.py): it is recorded in
derivation_failures, every other trace is still derived, and the count shows in /metrics and
/readyz (`derivation_failed_traces`, refreshed after each derivation turn).

Back-pressure instead of unbounded memory: when the queue holds too many spans, or its oldest
batch has waited longer than `max_lag_seconds`, `submit` raises `Overloaded` and the receivers
answer 503 / UNAVAILABLE with Retry-After; OTLP exporters retry those. A failed write (disk full,
an I/O error) fails the requests in it; they are never acknowledged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import duckdb

from store.derivation import Derive
from store.histogram import Histogram
from store.rows import FlatBatch
from store.scheduling import DERIVE_EVERY_SECONDS, pending_derivations
from store.writer import SpanWriter, WriteResult, to_arrow

_LOG = logging.getLogger(__name__)


class Overloaded(RuntimeError):
    """The writer is behind; try again after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class WriteFailed(RuntimeError):
    """The transaction holding this batch failed; nothing of it was acknowledged."""


class Closed(RuntimeError):
    """The writer is shutting down and takes no more batches."""


@dataclass
class GroupCommitStats:
    transactions: int = 0
    requests: int = 0
    spans_written: int = 0  # spans handed to the database, duplicates included
    spans_inserted: int = 0
    logs_inserted: int = 0  # OTLP log records newly stored
    logs_span_missing: int = 0  # of those, records whose span was not stored at the time
    failed_transactions: int = 0
    last_transaction_seconds: float = 0.0
    transaction_seconds: float = 0.0  # total time inside SpanWriter.write
    queue_wait_seconds: float = 0.0  # summed over requests: queued until their commit began
    last_commit_at: float | None = None  # time.monotonic() of the last successful commit
    # The last failed write (disk full, ...): /readyz is not ready while it is newer than
    # last_commit_at, since everything sent meanwhile is being refused.
    last_failure_at: float | None = None
    last_failure: str = ""
    commit_seconds: Histogram = field(default_factory=Histogram)  # for /metrics


@dataclass
class _Pending:
    batch: FlatBatch
    future: Future[WriteResult]
    queued_at: float = field(default_factory=time.monotonic)


class GroupCommitter:
    """The single writer. Thread-safe `submit`; `close()` drains what was queued and stops."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        derive: Derive | None = None,
        derive_every_seconds: float = DERIVE_EVERY_SECONDS,
        max_queued_spans: int = 200_000,
        max_transaction_spans: int = 50_000,
        max_lag_seconds: float = 5.0,
        retry_after_seconds: int = 2,
        linger_seconds: float = 0.05,
    ) -> None:
        # Public for tests, which set its after_write hook (store/writer.py).
        self.writer = SpanWriter(con)
        self.derivations = pending_derivations(derive) if derive is not None else None
        self.derive_every_seconds = derive_every_seconds
        # Set after each commit; set at start too, since marks may be left by a previous process.
        self._derive_wanted = threading.Event()
        self._derive_wanted.set()
        self._writer_done = threading.Event()
        # Held by the derivation's transactions and by writer tasks (retention): both rewrite
        # runs, steps and the marks of the same traces, which DuckDB would refuse as a conflict.
        self._derived_tables = threading.Lock()
        # When the oldest commit no finished derivation turn has covered was made (None: all
        # derived), for /metrics' derivation lag; written by both threads under its lock.
        self._oldest_underived: float | None = None
        self._underived_lock = threading.Lock()
        # Traces recorded in derivation_failures, as of the last derivation turn.
        self.derivation_failed_traces = 0
        # Derivation turns begun (counted under _derived_tables) and finished without error,
        # so that a writer task that marked traces can wait for the turn that derives them
        # (declared budgets: derivation_ticket / wait_for_derivation).
        self._turns_begun = 0
        self._turns_done = 0
        self._turns = threading.Condition()
        # The first Arrow conversion in a process pays pyarrow's lazy set-up (4.2 s measured on
        # this 2-core machine); pay it here, at start-up, rather than in the first request.
        to_arrow(FlatBatch())
        self._con = con
        self.max_queued_spans = max_queued_spans
        self.max_transaction_spans = max_transaction_spans
        self.max_lag_seconds = max_lag_seconds
        self.retry_after_seconds = retry_after_seconds
        self.linger_seconds = linger_seconds
        self.stats = GroupCommitStats()
        self._queue: deque[_Pending] = deque()
        self._queued_spans = 0
        self._condition = threading.Condition()
        self._closing = False
        self._decoding = 0  # requests being decoded now: they will want a commit soon
        # Work other than commits that must run on the one writing connection (retention).
        self._tasks: deque[tuple[Callable[[duckdb.DuckDBPyConnection], Any], Future[Any]]] = (
            deque())
        self._thread = threading.Thread(target=self._run, name="budgetscope-writer", daemon=True)
        self._thread.start()
        self._derive_thread: threading.Thread | None = None
        if self.derivations is not None:
            self._derive_thread = threading.Thread(
                target=self._derive_loop, args=(con.cursor(),), name="budgetscope-derive",
                daemon=True)
            self._derive_thread.start()

    def decoding_started(self) -> None:
        """A request is being decoded and will submit soon (see _take's linger)."""
        with self._condition:
            self._decoding += 1

    def decoding_finished(self) -> None:
        """Call after submit() (or after the request failed), once per decoding_started()."""
        with self._condition:
            self._decoding -= 1
            self._condition.notify()

    def submit(self, batch: FlatBatch) -> Future[WriteResult]:
        """Queue a batch; its future resolves once it is committed. Raises Overloaded, Closed."""
        future: Future[WriteResult] = Future()
        if batch.items == 0:
            future.set_result(WriteResult(0, 0))
            return future
        with self._condition:
            if self._closing:
                raise Closed("the server is shutting down")
            if self._queue:
                lag = time.monotonic() - self._queue[0].queued_at
                if lag > self.max_lag_seconds:
                    raise Overloaded(f"writer is {lag:.1f} s behind", self.retry_after_seconds)
            # An empty queue always takes a batch, however big: the body limit bounds it, and
            # refusing it would refuse it forever.
            if self._queue and self._queued_spans + batch.items > self.max_queued_spans:
                raise Overloaded(f"{self._queued_spans:,} spans are waiting to be written",
                                 self.retry_after_seconds)
            self._queue.append(_Pending(batch, future))
            self._queued_spans += batch.items  # log records count as spans here
            self._condition.notify()
        return future

    @property
    def queued_spans(self) -> int:
        return self._queued_spans

    @property
    def oldest_queued_seconds(self) -> float:
        """How long the oldest queued batch has waited (0 when the queue is empty)."""
        with self._condition:
            return time.monotonic() - self._queue[0].queued_at if self._queue else 0.0

    @property
    def derivation_lag_seconds(self) -> float:
        """How long the oldest commit not yet derived has waited (0 when everything committed
        is derived, or when this writer does not derive). Commits of this process only: marks
        a previous process left are derived by the first turn but not timed here."""
        with self._underived_lock:
            oldest = self._oldest_underived
        return 0.0 if oldest is None else time.monotonic() - oldest

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def run_in_writer(self, task: Callable[[duckdb.DuckDBPyConnection], Any]) -> Future[Any]:
        """Run `task(connection)` on the writer thread between two commits; one task per turn,
        so that queued batches are committed between the slices of a long job (retention).
        The database keeps a single writer. Raises Closed."""
        future: Future[Any] = Future()
        with self._condition:
            if self._closing:
                raise Closed("the server is shutting down")
            self._tasks.append((task, future))
            self._condition.notify()
        return future

    def request_derivation(self) -> None:
        """Ask for a derivation turn soon (after a writer task marked traces pending)."""
        self._derive_wanted.set()

    def derivation_ticket(self) -> int:
        """Inside a writer task (run_in_writer): the number of the first derivation turn that
        will see what the task commits; pass it to wait_for_derivation. Turns take the same
        lock as writer tasks, so every turn begun after this task ends sees its commit."""
        with self._turns:
            return self._turns_begun + 1

    def wait_for_derivation(self, ticket: int, timeout: float) -> bool:
        """Wait until the turn `ticket` (or a later one) has finished without error; False on
        timeout, or when this writer does not derive."""
        if self.derivations is None:
            return False
        deadline = time.monotonic() + timeout
        with self._turns:
            while self._turns_done < ticket:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._turns.wait(left)
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Refuse new batches, commit every queued one, stop the thread. True when drained."""
        with self._condition:
            self._closing = True
            self._condition.notify()
        began = time.monotonic()
        self._thread.join(timeout)
        if self._derive_thread is not None:
            # Its last turn derives everything the writer committed.
            left = None if timeout is None else max(timeout - (time.monotonic() - began), 0)
            self._derive_thread.join(left)
            if self._derive_thread.is_alive():
                return False
        return not self._thread.is_alive()

    def _take(self) -> list[_Pending] | None:
        """Everything queued up to the transaction cap (at least one batch); [] when a task is
        waiting (run_in_writer); None when closed and drained."""
        with self._condition:
            while not self._queue and not self._closing and not self._tasks:
                self._condition.wait()
            if not self._queue:
                return [] if self._tasks and not self._closing else None
            # Linger while other requests are still being decoded, so that one commit serves
            # them too (PostgreSQL's commit_delay/commit_siblings). A transaction costs a
            # mostly fixed ~100 ms here (~230 ms when derivation ran inside it) whatever its size,
            # and a 512-span request decodes in ~35 ms: without this, 4 exporters split into
            # two cohorts of 2 requests that alternate, paying two transactions per round.
            deadline = time.monotonic() + self.linger_seconds
            if self.linger_seconds and not self._closing:
                # Give the requests of the clients just answered a moment to arrive.
                self._condition.wait(min(0.005, self.linger_seconds))
            while (self._decoding > 0 and not self._closing
                   and self._queued_spans < self.max_transaction_spans):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._condition.wait(remaining)
            taken: list[_Pending] = []
            spans = 0
            while self._queue and (not taken or spans + self._queue[0].batch.items
                                   <= self.max_transaction_spans):
                pending = self._queue.popleft()
                taken.append(pending)
                spans += pending.batch.items
            self._queued_spans -= spans
            return taken

    def _run_task(self) -> None:
        with self._condition:
            if not self._tasks:
                return
            task, future = self._tasks.popleft()
        if not future.set_running_or_notify_cancel():
            return
        try:
            with self._derived_tables:
                result = task(self._con)
            future.set_result(result)
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits on it
            future.set_exception(error)

    def _run(self) -> None:
        while True:
            self._run_task()
            taken = self._take()
            if taken is None:
                with self._condition:
                    tasks, self._tasks = list(self._tasks), deque()
                for _, future in tasks:
                    future.set_exception(Closed("the server is shutting down"))
                self._writer_done.set()
                self._derive_wanted.set()  # closing and drained: one last turn derives the rest
                return
            if taken:
                self._commit(taken)

    def _derive_loop(self, con: duckdb.DuckDBPyConnection) -> None:
        """The derivation thread: a turn after commits, at most every derive_every_seconds,
        and a last one once the writer has stopped."""
        assert self.derivations is not None
        last_turn = time.monotonic() - self.derive_every_seconds
        try:
            while True:
                self._derive_wanted.wait()
                # Let the turn gather the commits of derive_every_seconds, unless closing.
                self._writer_done.wait(last_turn + self.derive_every_seconds - time.monotonic())
                self._derive_wanted.clear()
                last = self._writer_done.is_set()  # read before the turn: it must see it all
                last_turn = time.monotonic()
                # This turn covers every commit made before it begins (a commit from now on
                # marks itself underived again, even if the turn's snapshot happens to hold it).
                with self._underived_lock:
                    covered, self._oldest_underived = self._oldest_underived, None
                try:
                    with self._derived_tables:
                        with self._turns:
                            self._turns_begun += 1
                            turn = self._turns_begun
                        self.derivations.run(con)
                        self.derivation_failed_traces = self.derivations.failed(con)
                    with self._turns:
                        self._turns_done = max(self._turns_done, turn)
                        self._turns.notify_all()
                except Exception as error:  # noqa: BLE001 - the marks stay; retried next turn
                    _LOG.error("deriving runs and steps failed (will retry): %s", error)
                    with self._underived_lock:
                        if covered is not None:
                            self._oldest_underived = min(covered,
                                                         self._oldest_underived or covered)
                    self._derive_wanted.set()
                    if last:
                        return
                if last:
                    return
        finally:
            con.close()

    def _commit(self, taken: list[_Pending]) -> None:
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
            self.stats.failed_transactions += 1
            if len(taken) > 1:
                # One bad batch must not fail its neighbours: retry each alone.
                _LOG.warning("group commit of %d requests failed (%s); retrying one by one",
                             len(taken), error)
                for pending in taken:
                    self._commit([pending])
                return
            _LOG.error("write failed, request not acknowledged: %s", error)
            self.stats.last_failure_at, self.stats.last_failure = time.monotonic(), str(error)
            taken[0].future.set_exception(WriteFailed(f"could not store the spans: {error}"))
            return
        self.stats.last_transaction_seconds = time.monotonic() - started
        self.stats.last_commit_at = time.monotonic()
        self.stats.commit_seconds.observe(self.stats.last_transaction_seconds)
        self.stats.transaction_seconds += self.stats.last_transaction_seconds
        self.stats.queue_wait_seconds += waited
        self.stats.transactions += 1
        self.stats.requests += len(taken)
        self.stats.spans_written += merged.span_count
        self.stats.spans_inserted += result.inserted
        self.stats.logs_inserted += result.logs_inserted
        self.stats.logs_span_missing += result.logs_span_missing
        if self.derivations is not None:
            with self._underived_lock:
                if self._oldest_underived is None:
                    self._oldest_underived = self.stats.last_commit_at
            self._derive_wanted.set()
        for pending in taken:
            pending.future.set_result(result)
