"""The headline numbers (docs/metrics.md §3-§6) over one filter: what `/metrics` exports, what
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
# weekly_budget_utilisation is a ratio too (above 1 when a weekly budget was overspent), None
# when no agent in the window has a weekly dollar budget (docs/metrics.md §11.8).
RATES = ("exhaustion_rate", "client_timeout_rate", "upstream_error_rate", "reconciliation_rate",
         "usd_exhaustion_rate", "token_exhaustion_rate", "weekly_budget_utilisation")
COUNTS = ("runs", "budgeted_runs", "exhausted_runs", "steps", "client_timeouts",
          "upstream_errors", "write_steps", "reconciled_writes", "orphan_writes",
          "usd_budgeted_runs", "usd_exhausted_runs", "token_budgeted_runs",
          "token_exhausted_runs", "tokens", "cost_nano", "incomplete_cost_runs",
          "unpriced_steps")
# Which agent and ISO week weekly_budget_utilisation belongs to (None without one).
TEXTS = ("weekly_budget_agent", "weekly_budget_week")


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
    # docs/metrics.md §11: tokens and dollars (cost_nano: Σ known cost, in nano-dollars)
    usd_budgeted_runs: int
    usd_exhausted_runs: int
    usd_exhaustion_rate: float | None
    token_budgeted_runs: int
    token_exhausted_runs: int
    token_exhaustion_rate: float | None
    tokens: int
    cost_nano: int
    incomplete_cost_runs: int
    unpriced_steps: int
    weekly_budget_utilisation: float | None
    weekly_budget_agent: str | None
    weekly_budget_week: str | None

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
                   **{name: _rate(values[name]) for name in RATES},
                   **{name: None if values[name] is None else str(values[name])
                      for name in TEXTS})
