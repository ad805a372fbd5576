"""Commits flattened batches on a thread of its own while the caller decodes the next ones.

Decoding and flattening are Python (they hold the GIL); DuckDB's insert runs in C++ and releases
it, so on two cores the two overlap instead of taking turns. The queue is short: at most `depth`
batches wait, which bounds memory however large the input.
"""

from __future__ import annotations

import queue
import threading

from ingest.flatten import FlatBatch
from ingest.writer import SpanWriter

_STOP = None


class BackgroundWriter:
    def __init__(self, writer: SpanWriter, depth: int = 2) -> None:
        self.writer = writer
        self.inserted = 0
        self.duplicates = 0
        self.touched: set[str] = set()
        self._queue: queue.Queue[FlatBatch | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="budgetscope-file-writer",
                                        daemon=True)
        self._thread.start()

    def submit(self, batch: FlatBatch) -> None:
        """Queue a batch (waits while the queue is full); re-raises a failed write."""
        self._raise_if_failed()
        self._queue.put(batch)

    def close(self) -> None:
        """Wait until everything queued is committed; re-raises a failed write."""
        self._queue.put(_STOP)
        self._thread.join()
        self._raise_if_failed()

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
            self.touched.update(batch.trace_ids())
