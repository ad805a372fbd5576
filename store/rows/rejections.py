"""Why a span, a message or a file was not stored, said so that a person can act on it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Rejection:
    reason: str  # a short stable code, e.g. "bad_trace_id": what metrics and summaries count
    message: str  # one sentence naming the problem
    where: str = ""  # file, line or byte offset, span index: where to look
    spans: int = 1  # how many spans this rejection refused (0 for a warning about nothing lost)
    log_records: int = 0  # how many OTLP log records it refused

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


@dataclass
class RejectionLog:
    """Counts every rejection by reason and keeps the first few messages of each."""

    keep_per_reason: int = 5
    counts: Counter[str] = field(default_factory=Counter)
    spans: Counter[str] = field(default_factory=Counter)
    log_records: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[Rejection]] = field(default_factory=dict)

    def add(self, rejection: Rejection) -> None:
        self.counts[rejection.reason] += 1
        self.spans[rejection.reason] += rejection.spans
        if rejection.log_records:
            self.log_records[rejection.reason] += rejection.log_records
        examples = self.examples.setdefault(rejection.reason, [])
        if len(examples) < self.keep_per_reason:
            examples.append(rejection)

    def extend(self, rejections: list[Rejection]) -> None:
        for rejection in rejections:
            self.add(rejection)

    @property
    def rejected_spans(self) -> int:
        return sum(self.spans.values())

    @property
    def rejected_log_records(self) -> int:
        return sum(self.log_records.values())

    def __bool__(self) -> bool:
        return bool(self.counts)
