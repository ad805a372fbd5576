"""Durations as the SDK takes them: seconds (as asyncio, httpx and gRPC do) or timedeltas.

Its own module, below the budget, its steps, intents and tools, which all take durations, so
that none of them imports budget.py for it (budget.py imports them)."""

from __future__ import annotations

import datetime as dt
import math
from typing import Union

Duration = Union[float, int, dt.timedelta]


def seconds(value: Duration, what: str) -> float:
    """Durations are seconds (as in asyncio, httpx and gRPC) or timedeltas: finite and not
    negative (an infinite or NaN budget would be no deadline at all)."""
    try:
        out = value.total_seconds() if isinstance(value, dt.timedelta) else float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number of seconds or a timedelta, got "
                         f"{value!r}") from None
    if not (math.isfinite(out) and out >= 0):
        raise ValueError(f"{what} must be a finite, non-negative duration in seconds, got "
                         f"{value!r}")
    return out


def milliseconds(seconds: float) -> int:
    """Seconds as the whole milliseconds the span attributes carry (`budget.*_ms`)."""
    return int(round(seconds * 1000))
