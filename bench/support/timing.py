"""Wall-clock timing the benchmarks share."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed_ms(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and maximum milliseconds of `repeat` calls, after one untimed call that warms
    caches and imports."""
    call()  # warm
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times), max(times)
