"""What the group-commit writer counts, for /metrics and /readyz (budgetscope/server/operations.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from store.write.histogram import Histogram
from store.write.writer import WriteResult


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

    def committed(self, *, requests: int, spans_written: int, result: WriteResult,
                  started: float, waited: float) -> float:
        """A transaction begun at `started` (time.monotonic()) committed `requests` requests;
        `waited`: their queueing time, summed. Returns when it committed (last_commit_at)."""
        self.last_transaction_seconds = time.monotonic() - started
        self.last_commit_at = committed_at = time.monotonic()
        self.commit_seconds.observe(self.last_transaction_seconds)
        self.transaction_seconds += self.last_transaction_seconds
        self.queue_wait_seconds += waited
        self.transactions += 1
        self.requests += requests
        self.spans_written += spans_written
        self.spans_inserted += result.inserted
        self.logs_inserted += result.logs_inserted
        self.logs_span_missing += result.logs_span_missing
        return committed_at

    def refused(self, error: Exception) -> None:
        """A request's write failed on its own: it is not acknowledged."""
        self.last_failure_at, self.last_failure = time.monotonic(), str(error)
