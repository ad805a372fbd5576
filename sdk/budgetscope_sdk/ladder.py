"""The budget ladder: spend the run on steps down a ladder instead of off a cliff.

open        below 60% consumed: anything that fits its slice may start
narrowing   from 60%: stop widening (no new parallel branches, subagents, speculation)
fit_only    from 80%: admit only calls whose recorded p95 fits in what is left minus the reserve
landing     once only the reserve is left: nothing but the landing may spend it

A run with a dollar or token budget too is on the rung of whichever budget is nearest its end
(the ledger reports how much of its money and tokens is spent).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable

from opentelemetry.trace import Span

from budgetscope_sdk import attributes as attr

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


class PhaseTracker:
    """Where a run is on the ladder: the furthest phase its time, or its money and tokens, have
    reached (it never goes back). Each change is a `budget.phase` event on the run span,
    stamped when the time threshold was crossed, or when a money or token threshold was seen
    crossed (with `budget.phase.by`)."""

    def __init__(self) -> None:
        self.phase = OPEN
        self.by = "time"  # the budget that moved it to its phase: time, usd or tokens
        self._lock = threading.Lock()

    def observe(self, span: Span, elapsed_s: float, total_s: float, reserve_s: float,
                origin_ns: int, spent: tuple[str, str, float] | None,
                wall_ns: Callable[[], int]) -> str:
        by_time = phase_at(elapsed_s, total_s, reserve_s)
        now = by_time
        if spent is not None and spent[0] != OPEN and phase_index(spent[0]) > phase_index(now):
            now = spent[0]
        with self._lock:
            before = self.phase
            if phase_index(now) <= phase_index(before):
                return before
            self.phase = now
            self.by = "time" if now == by_time or spent is None else spent[1]
        starts = phase_starts(total_s, reserve_s)
        for index in range(phase_index(before) + 1, phase_index(now) + 1):
            phase = PHASES[index]
            if index > phase_index(by_time):
                assert spent is not None
                span.add_event(attr.PHASE_EVENT, {attr.PHASE: phase, attr.PHASE_BY: spent[1],
                                                  attr.CONSUMED_RATIO: spent[2]},
                               timestamp=wall_ns())
                continue
            offset = starts[phase]
            # Stamped at the instant the threshold was crossed, not when it was noticed.
            span.add_event(attr.PHASE_EVENT, {
                # A budget of 0 s (a caller whose deadline had passed) starts landed.
                attr.PHASE: phase,
                attr.CONSUMED_RATIO: round(offset / total_s, 4) if total_s else 1.0,
                attr.REMAINING_MS: int(round((total_s - offset) * 1000))},
                timestamp=origin_ns + int(round(offset * 1e9)))
        return now


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
