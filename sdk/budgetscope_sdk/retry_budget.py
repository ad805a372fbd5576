"""A retry budget shared by every run of a process, as Envoy, Linkerd and Finagle keep one per
client: retries may be at most `ratio` of the requests made in the last `window` seconds, plus
a floor of `min_per_second` so a quiet process can still retry at all. When a dependency fails
for everyone, every caller retrying at once turns its latency problem into a saturation problem;
the budget keeps retries a bounded share of the load whatever each run's own budget allows.

Defaults: 10% and 1 retry a second over 10 s. Linkerd's floor is 10 a second, sized for a
service's request rate; an agent process makes a few calls a second, where a floor of 10 would
let every retry through and make the ratio decorative."""

from __future__ import annotations

import math
import threading
from collections import deque

from budgetscope_sdk.clock import SYSTEM_CLOCK, Clock


class RetryBudget:
    """Share one instance process-wide (a module-level object): `RunBudget(...,
    retry_budget=shared)` or `retry(..., retry_budget=shared)`. Requests are counted as the
    first attempts made through `retry`/`aretry` with this budget, or by `record_request()`."""

    def __init__(self, ratio: float = 0.1, min_per_second: float = 1.0, window: float = 10.0,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        for name, value in (("ratio", ratio), ("min_per_second", min_per_second),
                            ("window", window)):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite, non-negative number, got {value!r}")
        if window == 0:
            raise ValueError("window must be more than 0 seconds")
        self.ratio = ratio
        self.min_per_second = min_per_second
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._requests: deque[float] = deque()
        self._retries: deque[float] = deque()

    def _forget(self, now: float) -> None:
        horizon = now - self.window
        for times in (self._requests, self._retries):
            while times and times[0] <= horizon:
                times.popleft()

    def record_request(self) -> None:
        """A first attempt was made (each one earns `ratio` of a retry)."""
        now = self._clock.monotonic()
        with self._lock:
            self._forget(now)
            self._requests.append(now)

    def try_retry(self) -> bool:
        """Spend one retry if the budget allows it now; False when it does not."""
        now = self._clock.monotonic()
        with self._lock:
            self._forget(now)
            allowed = self.ratio * len(self._requests) + self.min_per_second * self.window
            if len(self._retries) + 1 > allowed:
                return False
            self._retries.append(now)
            return True

    def snapshot(self) -> tuple[int, int]:
        """(requests, retries) counted in the current window."""
        with self._lock:
            self._forget(self._clock.monotonic())
            return len(self._requests), len(self._retries)
