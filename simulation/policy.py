"""A timeout policy to replay stored runs under: per-step caps, the run deadline, the minimum
budget below which a call is refused, and whether failed calls are retried.

Anything left unset means "as recorded": a call keeps the cap it had, a run keeps its own
budget, a call refused in the record stays refused and no new refusal is made.
Durations are written with a unit (`9s`, `9000ms`, `1.5m`) or `none` (no cap at all).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from queries.readable import duration

UNCAPPED = None  # a cap of `none`: the call may take whatever the run has left

_DURATION = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m)\s*$")
_UNIT_MS = {"ms": 1.0, "s": 1_000.0, "m": 60_000.0}


class PolicyError(ValueError):
    """A policy option that cannot be used, with a message fit for one line."""


def parse_duration_ms(text: str, option: str) -> int:
    """`9s` → 9000, `250ms` → 250, `1.5m` → 90000; a bare number is refused (ms or s?)."""
    match = _DURATION.match(text)
    if match is None:
        raise PolicyError(f"{option}: {text!r} is not a duration; write it with a unit, "
                          "e.g. 9s, 9000ms or 1.5m")
    return round(float(match["number"]) * _UNIT_MS[match["unit"]])


def parse_cap(text: str) -> tuple[str, int | None]:
    """`fetch_report=9s` → ("fetch_report", 9000); `fetch_report=none` → uncapped."""
    name, sep, value = text.rpartition("=")  # a duration never holds "=", a name might
    name = name.strip()
    if not sep or not name:
        raise PolicyError(f"--cap: {text!r} is not NAME=DURATION (e.g. fetch_report=9s)")
    if value.strip().lower() == "none":
        return name, UNCAPPED
    return name, parse_duration_ms(value, f"--cap {name}")


@dataclass(frozen=True)
class SimulationPolicy:
    """caps_ms keys are a step name (`fetch_report`, `gpt-4o`) or a step key
    (`tool:fetch_report`); a key match wins over a name match. deadline_ms replaces every
    budgeted run's budget B (an explicit absolute deadline moves by the same amount).
    min_start_ms: a call of a budget-aware run (its steps report budget.remaining_ms) is refused
    when the budget left beyond the run's landing reserve is below it."""

    caps_ms: Mapping[str, int | None] = field(default_factory=dict)
    deadline_ms: int | None = None
    min_start_ms: int | None = None
    retries: bool = True
    max_attempts: int = 3  # attempts per call when retrying (the first one included)
    backoff_base_ms: int = 250  # sleep before retry k: base * 2^(k-1)

    def __post_init__(self) -> None:
        object.__setattr__(self, "caps_ms", MappingProxyType(dict(self.caps_ms)))
        for name, cap in self.caps_ms.items():
            if cap is not None and cap <= 0:
                raise PolicyError(f"--cap {name}: a cap must be positive")
        if self.deadline_ms is not None and self.deadline_ms <= 0:
            raise PolicyError("--deadline must be positive")
        if self.min_start_ms is not None and self.min_start_ms < 0:
            raise PolicyError("--min-start cannot be negative")
        if self.max_attempts < 1:
            raise PolicyError("max_attempts must be at least 1")

    @classmethod
    def parse(cls, caps: Iterable[str] = (), deadline: str | None = None,
              min_start: str | None = None, retries: bool = True) -> SimulationPolicy:
        parsed: dict[str, int | None] = {}
        for text in caps:
            name, cap = parse_cap(text)
            if name in parsed:
                raise PolicyError(f"--cap {name} given twice")
            parsed[name] = cap
        return cls(parsed,
                   None if deadline is None else parse_duration_ms(deadline, "--deadline"),
                   None if min_start is None else parse_duration_ms(min_start, "--min-start"),
                   retries)

    def key(self) -> tuple[object, ...]:
        """Every field as a hashable tuple, caps sorted: equal policies, equal keys (a cache of
        replays keys on it; the caps mapping itself cannot be hashed)."""
        return (tuple(sorted(self.caps_ms.items())), self.deadline_ms, self.min_start_ms,
                self.retries, self.max_attempts, self.backoff_base_ms)

    def describe(self) -> str:
        """The policy in words, durations as every view writes them (2.5 s, 1 min 30 s)."""
        caps = ", ".join(f"{k}={'none' if v is None else duration(v)}"
                         for k, v in sorted(self.caps_ms.items())) or "as recorded"
        deadline = "as recorded" if self.deadline_ms is None else duration(self.deadline_ms)
        min_start = "as recorded" if self.min_start_ms is None else duration(self.min_start_ms)
        return (f"caps: {caps}; deadline: {deadline}; min start: {min_start}; "
                f"retries: {'on' if self.retries else 'off'}")
