"""The product's alerting signals over one recent window (SPEC §3-§6): what `/metrics` exports
and `budgetscope check` compares with thresholds. One function, so that both say the same
number and a second backend (ClickHouse) has one query to translate."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import pandas as pd

from queries.loader import Connection, frame

# The rates, in the order `check` lists them; each is NULL (None) when its denominator is 0.
RATES = ("exhaustion_rate", "client_timeout_rate", "upstream_error_rate", "reconciliation_rate")
COUNTS = ("runs", "budgeted_runs", "exhausted_runs", "steps", "client_timeouts",
          "upstream_errors", "write_steps", "reconciled_writes", "orphan_writes")


@dataclass(frozen=True)
class Window:
    """Runs that started in [since, until), UTC; optionally one agent."""

    since: dt.datetime
    until: dt.datetime
    agent: str | None = None

    @classmethod
    def ending(cls, until: dt.datetime, length: dt.timedelta, agent: str | None = None
               ) -> Window:
        return cls(until - length, until, agent)

    def parameters(self) -> dict[str, object]:
        return {"since_ns": _epoch_ns(self.since), "until_ns": _epoch_ns(self.until),
                "agent": self.agent}


@dataclass(frozen=True)
class Signals:
    window: Window
    runs: int
    budgeted_runs: int
    exhausted_runs: int
    exhaustion_rate: float | None
    steps: int
    client_timeouts: int
    client_timeout_rate: float | None
    upstream_errors: int
    upstream_error_rate: float | None
    write_steps: int
    reconciled_writes: int
    reconciliation_rate: float | None
    orphan_writes: int

    def value(self, name: str) -> float | None:
        return getattr(self, name)


def _epoch_ns(value: dt.datetime) -> int:
    delta = value.astimezone(dt.UTC) - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1_000


def _rate(value: object) -> float | None:
    if value is None:
        return None
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) else number


def recent_signals(con: Connection, window: Window) -> Signals:
    """Counts and rates over the runs that started inside `window` (sql/recent_signals.sql)."""
    rows = frame(con, "recent_signals", window.parameters())
    assert len(rows) == 1  # an aggregate without GROUP BY always returns one row
    values = {name: (None if pd.isna(value) else value)
              for name, value in rows.iloc[0].items()}
    return Signals(window=window,
                   **{name: int(values[name] or 0) for name in COUNTS},
                   **{name: _rate(values[name]) for name in RATES})
