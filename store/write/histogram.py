"""A thread-safe latency histogram with fixed buckets, in the shape Prometheus exposes
(cumulative `le` buckets, a sum and a count), kept by whoever measures (the writer's commits)."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from dataclasses import dataclass

# Seconds. A commit costs ~0.1 s here with spikes to seconds under load (commit_queue.py notes);
# the buckets resolve that range and say when it goes past the 5 s back-pressure lag.
COMMIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class HistogramSnapshot:
    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]  # observations <= each bound, then the +Inf total last
    total: float
    count: int


class Histogram:
    def __init__(self, bounds: Sequence[float] = COMMIT_BUCKETS) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError("histogram bounds must be increasing and distinct")
        self.bounds = tuple(float(b) for b in bounds)
        self._counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self.bounds, value)  # le: a value equal to a bound is in it
        with self._lock:
            self._counts[index] += 1
            self._sum += value

    def snapshot(self) -> HistogramSnapshot:
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, running = [], 0
        for count in counts:
            running += count
            cumulative.append(running)
        return HistogramSnapshot(self.bounds, tuple(cumulative), total, running)
