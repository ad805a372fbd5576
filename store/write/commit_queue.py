"""The group-commit writer's queue: admission with back-pressure, and what one commit takes.

Back-pressure instead of unbounded memory: when the queue holds too many spans, or its oldest
batch has waited longer than `max_lag_seconds`, `submit` raises `Overloaded` and the receivers
answer 503 / UNAVAILABLE with Retry-After; OTLP exporters retry those.

Throughput comes from batching: a DuckDB transaction has a mostly fixed cost (statement set-up,
WAL fsync) that one 512-span request would pay alone. While one transaction runs the next
requests queue up and share the following one, and `take` lingers briefly (at most
`linger_seconds`) while other requests are still being decoded, so that they join the same
commit instead of paying for another.

Writer tasks (run_in_writer: retention, declared budgets) wait in the same queue, under the same
condition, so that the writer thread wakes for either.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import duckdb

from store.rows.batch import FlatBatch
from store.write.writer import WriteResult

WriterTask = Callable[[duckdb.DuckDBPyConnection], Any]


class Overloaded(RuntimeError):
    """The writer is behind; try again after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Closed(RuntimeError):
    """The writer is shutting down and takes no more batches."""


@dataclass
class Pending:
    batch: FlatBatch
    future: Future[WriteResult]
    queued_at: float = field(default_factory=time.monotonic)


class CommitQueue:
    """Thread-safe: receivers `submit`, the writer thread `take`s and runs `next_task`."""

    def __init__(self, *, max_queued_spans: int, max_transaction_spans: int,
                 max_lag_seconds: float, retry_after_seconds: int,
                 linger_seconds: float) -> None:
        self.max_queued_spans = max_queued_spans
        self.max_transaction_spans = max_transaction_spans
        self.max_lag_seconds = max_lag_seconds
        self.retry_after_seconds = retry_after_seconds
        self.linger_seconds = linger_seconds
        self._queue: deque[Pending] = deque()
        self._queued_spans = 0
        self._condition = threading.Condition()
        self._closing = False
        self._decoding = 0  # requests being decoded now: they will want a commit soon
        # Work other than commits that must run on the one writing connection (retention).
        self._tasks: deque[tuple[WriterTask, Future[Any]]] = deque()

    def decoding_started(self) -> None:
        with self._condition:
            self._decoding += 1

    def decoding_finished(self) -> None:
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
            self._queue.append(Pending(batch, future))
            self._queued_spans += batch.items  # log records count as spans here
            self._condition.notify()
        return future

    @property
    def queued_spans(self) -> int:
        return self._queued_spans

    @property
    def oldest_queued_seconds(self) -> float:
        with self._condition:
            return time.monotonic() - self._queue[0].queued_at if self._queue else 0.0

    def add_task(self, task: WriterTask) -> Future[Any]:
        """Queue `task` for the writer thread. Raises Closed."""
        future: Future[Any] = Future()
        with self._condition:
            if self._closing:
                raise Closed("the server is shutting down")
            self._tasks.append((task, future))
            self._condition.notify()
        return future

    def next_task(self) -> tuple[WriterTask, Future[Any]] | None:
        with self._condition:
            return self._tasks.popleft() if self._tasks else None

    def close(self) -> None:
        """Refuse new batches and tasks; `take` drains what is queued, then returns None."""
        with self._condition:
            self._closing = True
            self._condition.notify()

    def refuse_tasks(self) -> None:
        """Once closed and drained: fail the tasks still waiting."""
        with self._condition:
            tasks, self._tasks = list(self._tasks), deque()
        for _, future in tasks:
            future.set_exception(Closed("the server is shutting down"))

    def take(self) -> list[Pending] | None:
        """Everything queued up to the transaction cap (at least one batch); [] when a task is
        waiting (add_task); None when closed and drained."""
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
            taken: list[Pending] = []
            spans = 0
            while self._queue and (not taken or spans + self._queue[0].batch.items
                                   <= self.max_transaction_spans):
                pending = self._queue.popleft()
                taken.append(pending)
                spans += pending.batch.items
            self._queued_spans -= spans
            return taken
