"""Where the SDK reads time: a monotonic clock for durations, the wall clock only for the
absolute deadline and span timestamps. Tests and simulations inject a ManualClock."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; only differences mean anything."""

    def wall_ns(self) -> int:
        """Nanoseconds since the Unix epoch (what span timestamps and deadlines are written in)."""


class SystemClock:
    """The process's clocks: time.monotonic for every duration, time.time_ns for timestamps."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ns(self) -> int:
        return time.time_ns()


class ManualClock:
    """A clock that moves only when told to, so budgets and span timestamps are exact in tests
    and in simulated runs. Both readings advance together (a simulated host with no clock
    corrections)."""

    def __init__(self, start_unix_s: float = 1_764_000_000.0) -> None:
        self._lock = threading.Lock()
        self._elapsed = 0.0
        self._origin_ns = int(round(start_unix_s * 1e6)) * 1000  # µs: exact from a float

    def monotonic(self) -> float:
        with self._lock:
            return self._elapsed

    def wall_ns(self) -> int:
        with self._lock:
            return self._origin_ns + int(round(self._elapsed * 1e9))

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        with self._lock:
            self._elapsed += seconds


SYSTEM_CLOCK = SystemClock()


def sleep_on(clock: Clock, seconds: float) -> None:
    """Sleep on `clock`: a clock that can be advanced (a ManualClock) just moves."""
    advance = getattr(clock, "advance", None)
    if advance is not None:
        advance(seconds)
    else:
        time.sleep(seconds)


async def asleep_on(clock: Clock, seconds: float) -> None:
    """The asyncio form of sleep_on (a ManualClock moves and yields to the loop once)."""
    advance = getattr(clock, "advance", None)
    if advance is not None:
        advance(seconds)
        await asyncio.sleep(0)
    else:
        await asyncio.sleep(seconds)
