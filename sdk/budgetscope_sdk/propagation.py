"""Deadline propagation: the headers a call carries so the next hop can honour our deadline, and
the receiving side's reading of them.

Two HTTP headers travel together: `Deadline-Epoch-Ms`, the absolute deadline (for logs and for
hops whose clock is trusted), and `Deadline-Remaining-Ms`, the time left when the request was
sent (what a receiver should start its own timer from, as gRPC does, so unsynchronised clocks
cannot stretch it). gRPC carries the remaining time as its `grpc-timeout` header, which the gRPC
client writes from a stub call's `timeout=` argument. A step that belongs to an intent also
sends its `Idempotency-Key`.

What a caller sends is untrusted input: `RemoteDeadline.from_headers` never raises on it, and a
value that is not a finite, non-negative number of milliseconds, or one above the receiver's
maximum, gives the default or the maximum instead, with the reason in `problem`."""

from __future__ import annotations

import math
from collections.abc import Mapping

from budgetscope_sdk.clock import SYSTEM_CLOCK, Clock

DEADLINE_HEADER = "Deadline-Epoch-Ms"
REMAINING_HEADER = "Deadline-Remaining-Ms"
IDEMPOTENCY_HEADER = "Idempotency-Key"
_GRPC_UNITS = (("n", 1e9), ("u", 1e6), ("m", 1e3), ("S", 1.0), ("M", 1 / 60), ("H", 1 / 3600))
# What a receiver accepts when it names no maximum of its own: a day. A caller's deadline is
# never unbounded on this side, whatever it sent.
DEFAULT_MAX_S = 86_400.0
_SHOWN = 40  # characters of a bad header value quoted back in `problem`


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
    `expired(margin)` at each phase boundary, `remaining()` to bound what they call next.

    `source` says where the deadline came from (`Deadline-Remaining-Ms`, `Deadline-Epoch-Ms`,
    `default` or `maximum`); `problem` says why a header was not taken as sent (None when it
    was)."""

    def __init__(self, remaining_s: float, clock: Clock = SYSTEM_CLOCK, *,
                 source: str = "given", problem: str | None = None) -> None:
        if not math.isfinite(remaining_s) or remaining_s < 0:
            raise ValueError(f"a remote deadline is a finite, non-negative number of seconds, "
                             f"got {remaining_s!r}")
        self._clock = clock
        self._deadline = clock.monotonic() + remaining_s
        self.source = source
        self.problem = problem

    @classmethod
    def from_headers(cls, headers: Mapping[str, str], clock: Clock = SYSTEM_CLOCK,
                     default_s: float | None = None, *,
                     max_s: float | None = None) -> RemoteDeadline | None:
        """The caller's deadline from Deadline-Remaining-Ms when present (our clock starts it),
        else from Deadline-Epoch-Ms against our wall clock (a deadline already passed is 0 s
        left). Header names are matched case-insensitively.

        Never raises on what the caller sent. A value that is malformed, negative, NaN or
        infinite is replaced by `default_s` (else `max_s`, else None as if absent); one above
        `max_s` (default one day) is cut to it. None when the request carried no deadline and
        no default is given."""
        ceiling = DEFAULT_MAX_S if max_s is None else _checked("max_s", max_s)
        default = None if default_s is None else min(_checked("default_s", default_s), ceiling)
        lowered = {str(key).lower(): value for key, value in headers.items()}
        for header in (REMAINING_HEADER, DEADLINE_HEADER):
            text = lowered.get(header.lower())
            if text is None:
                continue
            value, problem = _parse_ms(text, header)
            if value is not None:
                left_s = value / 1000.0 if header == REMAINING_HEADER else max(
                    0.0, value - clock.wall_ns() / 1e6) / 1000.0
                if left_s > ceiling:
                    return cls(ceiling, clock, source="maximum",
                               problem=f"{header} {_shown(text)} is above the maximum of "
                                       f"{ceiling:g} s")
                return cls(left_s, clock, source=header)
            if default is not None:
                return cls(default, clock, source="default", problem=problem)
            if max_s is not None:
                return cls(ceiling, clock, source="maximum", problem=problem)
            return None
        return None if default is None else cls(default, clock, source="default")

    def remaining(self) -> float:
        return max(0.0, self._deadline - self._clock.monotonic())

    def expired(self, margin: float = 0.0) -> bool:
        return self._clock.monotonic() >= self._deadline - margin


def _checked(name: str, value: float) -> float:
    """The receiver's own settings are code, not input: a bad one is a programming error."""
    out = float(value)
    if not math.isfinite(out) or out < 0:
        raise ValueError(f"{name} must be a finite, non-negative number of seconds, got "
                         f"{value!r}")
    return out


def _shown(text: str) -> str:
    return repr(text[:_SHOWN] + ("…" if len(text) > _SHOWN else ""))


def _parse_ms(text: str, header: str) -> tuple[float | None, str | None]:
    """(milliseconds, None) for a finite non-negative number, else (None, why not)."""
    try:
        value = float(str(text).strip())
    except (TypeError, ValueError):
        return None, f"{header} {_shown(str(text))} is not a number of milliseconds"
    if not math.isfinite(value):
        return None, f"{header} {_shown(str(text))} is not finite"
    if value < 0:
        return None, f"{header} {_shown(str(text))} is negative"
    return value, None
