"""One run's spend as its bill grew (docs/metrics.md §11.6): its metered calls in the order each
one's cost is known (by end, then start, then span id), the cumulative known cost after each,
and the call at which it reached the dollar budget: the crossing. The run view draws it.

The same walk as the derivation's crosser, over the same rows (metered_spans), so the crossing
found here is the call whose top-level step the run's `cost_crosser_*` columns name, with the
spend just before and after it; a test holds the two equal on every usd-exhausted run of the
bundled sample. Amounts stay integer nano-dollars: an unpriced call adds nothing known (its cost
is unknown, never 0) and is kept, so a page can mark it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from queries.loader import Connection, frame
from queries.readable import missing

SPEND_COLUMNS = ["span_id", "top_step_id", "start_ns", "end_ns", "model", "tokens", "cost_nano",
                 "cost_source", "cumulative_nano"]


@dataclass(frozen=True)
class RunSpend:
    """The run's metered calls in bill order (SPEND_COLUMNS; `cumulative_nano` the known cost
    up to and including each), its dollar budget (None: unknown) and the row of the call that
    reached it (None: never reached, or no budget)."""

    calls: pd.DataFrame
    budget_nano: int | None
    crossing: int | None

    @property
    def unpriced_calls(self) -> int:
        return int(self.calls["cost_nano"].isna().sum())


def run_spend(con: Connection, run: Mapping[str, Any]) -> RunSpend:
    """`run` (a row of the run summary, with its id and usd_budget_nano) as it spent."""
    calls = frame(con, "run_spend", {"run_id": str(run["run_id"])})
    budget = run.get("usd_budget_nano")
    return spend_of(calls, None if missing(budget) else int(budget))


def spend_of(calls: pd.DataFrame, budget_nano: int | None) -> RunSpend:
    """The cumulative known cost of `calls` (already in bill order) and the first call at
    which it reaches `budget_nano` (a budget of 0 is reached by the first call)."""
    known = calls["cost_nano"].astype("Int64").fillna(0).to_numpy(dtype=np.int64)
    cumulative = np.cumsum(known, dtype=np.int64) if len(known) else known
    out = calls.assign(cumulative_nano=cumulative)[SPEND_COLUMNS]
    crossing = None
    if budget_nano is not None and len(cumulative):
        reached = np.flatnonzero(cumulative >= budget_nano)
        crossing = int(reached[0]) if reached.size else None
    return RunSpend(out.reset_index(drop=True), budget_nano, crossing)
