"""Commits flattened batches on a thread of its own while the caller decodes the next ones.

Decoding and flattening are Python (they hold the GIL); DuckDB's insert runs in C++ and releases
it, so on two cores the two overlap instead of taking turns. The queue is short: at most `depth`
batches wait (one by default: a second waiting batch bought no speed and cost ~60 MB at 20k
spans a batch), which bounds memory however large the input.
"""

from __future__ import annotations

import queue
import threading

from store.derive.pending import PendingDerivations
from store.derive.scheduling import DERIVE_EVERY_SPANS
from store.lifecycle import joined
from store.rows.batch import FlatBatch
from store.write.writer import SpanWriter

_STOP = None


class BackgroundWriter:
    """store/lifecycle.py's shape: `stop()` queues the end behind the batches submitted before
    it, which the thread commits first; `close()` stops, waits, and finishes the load."""

    def __init__(self, writer: SpanWriter, depth: int = 1,
                 derivations: PendingDerivations | None = None) -> None:
        self.writer = writer
        self.derivations = derivations
        self._since_derived = 0
        self.inserted = 0
        self.duplicates = 0
        self.logs_inserted = 0
        self.logs_duplicates = 0
        self.logs_span_missing = 0
        self.touched: set[str] = set()
        self._queue: queue.Queue[FlatBatch | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="budgetscope-file-writer",
                                        daemon=True)

    @property
    def name(self) -> str:
        return self._thread.name

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End once everything submitted is committed (waits, as `submit` does, while the queue
        is full)."""
        if not self._stopped:
            self._stopped = True
            self._queue.put(_STOP)

    def join(self, timeout: float | None = None) -> bool:
        return joined(self._thread, timeout)

    def submit(self, batch: FlatBatch) -> None:
        """Queue a batch (waits while the queue is full); re-raises a failed write."""
        self._raise_if_failed()
        self._queue.put(batch)

    def close(self) -> None:
        """Wait until everything queued is committed and derived; re-raises a failure."""
        self.stop()
        self.join()
        self._raise_if_failed()
        if self.derivations is not None:
            self.derivations.run(self.writer.con)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is _STOP:
                return
            if self._error is not None:
                continue  # after a failure, drain without writing so producers never block
            try:
                result = self.writer.write(batch)
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                self._error = error
                continue
            self.inserted += result.inserted
            self.duplicates += result.duplicates
            self.logs_inserted += result.logs_inserted
            self.logs_duplicates += result.logs_duplicates
            self.logs_span_missing += result.logs_span_missing
            self.touched.update(batch.trace_ids())
            self._since_derived += batch.items
            if self.derivations is not None and self._since_derived >= DERIVE_EVERY_SPANS:
                self._since_derived = 0
                try:
                    self.derivations.run(self.writer.con)
                except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                    self._error = error
