"""The budget ladder: spend the run on steps down a ladder instead of off a cliff.

open        below 60% consumed: anything that fits its slice may start
narrowing   from 60%: stop widening (no new parallel branches, subagents, speculation)
fit_only    from 80%: admit only calls whose recorded p95 fits in what is left minus the reserve
landing     once only the reserve is left: nothing but the landing may spend it
"""

from __future__ import annotations

import threading
from collections import deque

OPEN = "open"
NARROWING = "narrowing"
FIT_ONLY = "fit_only"
LANDING = "landing"
PHASES = (OPEN, NARROWING, FIT_ONLY, LANDING)

NARROWING_AT = 0.6
FIT_ONLY_AT = 0.8


def phase_index(phase: str) -> int:
    return PHASES.index(phase)


def phase_at(elapsed_s: float, total_s: float, reserve_s: float) -> str:
    if total_s - elapsed_s <= reserve_s:
        return LANDING
    if elapsed_s >= FIT_ONLY_AT * total_s:
        return FIT_ONLY
    if elapsed_s >= NARROWING_AT * total_s:
        return NARROWING
    return OPEN


def phase_starts(total_s: float, reserve_s: float) -> dict[str, float]:
    """Seconds after the run's start at which each phase begins (the landing may come first
    when the reserve is larger than 20%: a phase never starts before the one below it)."""
    landing = max(0.0, total_s - reserve_s)
    narrowing = min(NARROWING_AT * total_s, landing)
    fit_only = min(FIT_ONLY_AT * total_s, landing)
    return {OPEN: 0.0, NARROWING: narrowing, FIT_ONLY: fit_only, LANDING: landing}


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, DuckDB's quantile_cont)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


class LatencyBook:
    """Recorded step durations per step key (`kind:name`), for the fit_only rung. Shared across
    runs of one process by default; give each RunBudget its own to keep them apart."""

    def __init__(self, keep: int = 200, min_samples: int = 5) -> None:
        self._lock = threading.Lock()
        self._keep = keep
        self.min_samples = min_samples
        self._samples: dict[str, deque[float]] = {}

    def record(self, key: str, seconds: float) -> None:
        with self._lock:
            samples = self._samples.get(key)
            if samples is None:
                samples = self._samples[key] = deque(maxlen=self._keep)
            samples.append(seconds)

    def p95(self, key: str) -> float | None:
        """None until the key has min_samples durations: an unknown call is not refused."""
        with self._lock:
            samples = list(self._samples.get(key, ()))
        if len(samples) < self.min_samples:
            return None
        return quantile(samples, 0.95)


DEFAULT_LATENCIES = LatencyBook()
