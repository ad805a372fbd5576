"""The headline numbers (SPEC §3-§6) over one filter: what `/metrics` exports, what
`budgetscope check` compares with thresholds and what the Overview shows. One query
(sql/headline.sql), so that the three say the same number and a second backend (ClickHouse) has
one query to translate."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from queries.filters import Filters
from queries.loader import Connection
from queries.reports import headline

# The rates, in the order `check` lists them; each is NULL (None) when its denominator is 0.
RATES = ("exhaustion_rate", "client_timeout_rate", "upstream_error_rate", "reconciliation_rate")
COUNTS = ("runs", "budgeted_runs", "exhausted_runs", "steps", "client_timeouts",
          "upstream_errors", "write_steps", "reconciled_writes", "orphan_writes")


@dataclass(frozen=True)
class Signals:
    window: Filters
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


def _rate(value: object) -> float | None:
    if value is None:
        return None
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) else number


def recent_signals(con: Connection, window: Filters) -> Signals:
    """Counts and rates over the runs that started inside `window` (the headline row)."""
    values = {name: (None if pd.isna(value) else value)
              for name, value in headline(con, window).iloc[0].items()}
    return Signals(window=window,
                   **{name: int(values[name] or 0) for name in COUNTS},
                   **{name: _rate(values[name]) for name in RATES})
