"""When runs start: five ISO weeks with a weekday and time-of-day shape, in start order.

Run i of n starts at the inverse traffic CDF of (i + u_i) / n, so start times are increasing in
i and the generator can stream runs in time order without sorting them.
"""

from __future__ import annotations

import bisect
import math
from functools import lru_cache

from .policy import utc_ns

START_NS = utc_ns(2026, 10, 26)  # Monday of ISO week 2026-W44
# Runs start by Sunday 2026-11-29 23:40 so that even a long run ends before 2026-11-30 00:00.
END_NS = utc_ns(2026, 11, 29, 23) + 40 * 60 * 1_000_000_000
CUTOFF_NS = utc_ns(2026, 11, 30)
BUCKET_NS = 10 * 60 * 1_000_000_000

_WEEKDAY = (1.0, 1.05, 1.05, 1.0, 0.9, 0.4, 0.35)  # Monday first


def _hour_shape(hour: float) -> float:
    """UTC traffic: a European-and-American business-day hump over a quiet night."""
    day = math.exp(-(((hour - 14.5) / 4.2) ** 2))
    apac = 0.25 * math.exp(-(((hour - 3.0) / 2.5) ** 2))
    return 0.1 + day + apac


@lru_cache(maxsize=1)
def _cumulative() -> tuple[float, ...]:
    cum: list[float] = []
    total = 0.0
    for b in range((END_NS - START_NS) // BUCKET_NS):
        t_hours = b * BUCKET_NS / 3.6e12
        day = int(t_hours // 24)
        weight = _WEEKDAY[day % 7] * _hour_shape(t_hours % 24) * (1 + 0.04 * (day // 7))
        total += weight
        cum.append(total)
    return tuple(cum)


def run_start_ns(index: int, n_runs: int, u: float) -> int:
    """Start of run `index` of `n_runs`; `u` in [0, 1) jitters it within its slot."""
    cum = _cumulative()
    x = (index + u) / n_runs * cum[-1]
    b = min(bisect.bisect_right(cum, x), len(cum) - 1)
    lo = cum[b - 1] if b else 0.0
    frac = (x - lo) / (cum[b] - lo)
    return START_NS + b * BUCKET_NS + int(frac * BUCKET_NS)


def busy_factor(t_ns: int) -> float:
    """How crowded queues are at this time of day (1 at the quietest, ~2 at the peak)."""
    hour = (t_ns - START_NS) / 3.6e12 % 24
    return 1.0 + _hour_shape(hour) - 0.1
