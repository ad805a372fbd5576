"""Deadline propagation: the headers a call carries so the next hop can honour our deadline.

Two HTTP headers travel together: `Deadline-Epoch-Ms`, the absolute deadline (for logs and for
hops whose clock is trusted), and `Deadline-Remaining-Ms`, the time left when the request was
sent (what a receiver should start its own timer from, as gRPC does, so unsynchronised clocks
cannot stretch it). gRPC carries the remaining time as its `grpc-timeout` header, which the gRPC
client writes from a stub call's `timeout=` argument."""

from __future__ import annotations

from collections.abc import Mapping

from budgetscope_sdk.clock import SYSTEM_CLOCK, Clock

DEADLINE_HEADER = "Deadline-Epoch-Ms"
REMAINING_HEADER = "Deadline-Remaining-Ms"
_GRPC_UNITS = (("n", 1e9), ("u", 1e6), ("m", 1e3), ("S", 1.0), ("M", 1 / 60), ("H", 1 / 3600))


def deadline_headers(deadline_unix_ms: int, remaining_ms: int) -> dict[str, str]:
    return {DEADLINE_HEADER: str(int(deadline_unix_ms)),
            REMAINING_HEADER: str(max(0, int(remaining_ms)))}


def grpc_timeout_header(seconds: float) -> str:
    """The gRPC wire form: at most 8 digits and a unit, rounded up so it is never zero while
    time is left (gRPC's PROTOCOL-HTTP2 'TimeoutValue TimeoutUnit')."""
    seconds = max(0.0, seconds)
    for unit, per_second in _GRPC_UNITS:
        value = seconds * per_second
        if value < 1e8:
            whole = int(value)
            return f"{whole + (1 if value > whole else 0)}{unit}"
    return "99999999H"


class RemoteDeadline:
    """A receiving service's view of the caller's deadline, for handlers that stop themselves:
    `expired(margin)` at each phase boundary, `remaining()` to bound what they call next."""

    def __init__(self, remaining_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._deadline = clock.monotonic() + remaining_s

    @classmethod
    def from_headers(cls, headers: Mapping[str, str], clock: Clock = SYSTEM_CLOCK,
                     default_s: float | None = None) -> RemoteDeadline | None:
        """From Deadline-Remaining-Ms when present (our clock starts it), else from
        Deadline-Epoch-Ms against our wall clock; None when the request carried neither and no
        default is given. Header names are matched case-insensitively."""
        lowered = {key.lower(): value for key, value in headers.items()}
        remaining = lowered.get(REMAINING_HEADER.lower())
        if remaining is not None:
            return cls(_parse_ms(remaining, REMAINING_HEADER) / 1000.0, clock)
        epoch = lowered.get(DEADLINE_HEADER.lower())
        if epoch is not None:
            left_ms = _parse_ms(epoch, DEADLINE_HEADER) - clock.wall_ns() / 1e6
            return cls(max(0.0, left_ms) / 1000.0, clock)
        return None if default_s is None else cls(default_s, clock)

    def remaining(self) -> float:
        return max(0.0, self._deadline - self._clock.monotonic())

    def expired(self, margin: float = 0.0) -> bool:
        return self._clock.monotonic() >= self._deadline - margin


def _parse_ms(text: str, header: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"{header} is not a number of milliseconds: {text[:40]!r}") from None
    if value < 0 or value != value:
        raise ValueError(f"{header} must be a non-negative number of milliseconds: {text[:40]!r}")
    return value
