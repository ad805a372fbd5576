"""Finding runs: the runs report narrowed by outcome, exhaustion, culprit, holder, step key,
step class, writes (uncertain, reconciled, orphan), utilisation, run id prefix, and by tokens
and dollars (dollar or token exhaustion, a cost that is a lower bound, a range of cost), sorted
and paged. `budgetscope report runs` and the
dashboard's Runs page both search through `search_runs`, so a link from a chart and the command
line find the same runs.

The narrowing happens on the runs report's rows (one per run in the time and agent filter); the
step filters ask `runs_with_steps` for the run ids that hold such a step, nested steps included,
and the dollar and token exhaustion filters the cost report's rows (docs/metrics.md §11.5).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal

import pandas as pd

from queries.filters import Filters
from queries.loader import Connection, frame
from queries.reports import runs as runs_report

# Columns a search can sort by, each with the order a person usually wants first.
SORTABLE: dict[str, bool] = {  # column -> descending by default
    "start": True, "utilisation": True, "elapsed_ms": True, "overrun_ms": True,
    "culprit_share": True, "budget_ms": True, "unattributed_ms": True, "run_id": False,
    "agent": False, "cost_usd": True, "tokens": True,
}
NOT_STATED = "none"  # the outcome filter's name for runs that state no outcome
# The write filter's values (docs/metrics.md §6): runs holding an uncertain write, a write read
# back, or an orphan (uncertain and never read back).
WRITES = ("uncertain", "reconciled", "orphan")


class SearchError(ValueError):
    """A search value that cannot be used, with a message fit for one line."""


@dataclass(frozen=True)
class RunSearch:
    outcomes: tuple[str, ...] = ()  # stated outcomes; NOT_STATED for runs that state none
    exhausted: bool | None = None
    culprit: str | None = None  # a step key
    holder: str | None = None  # a step key
    step_key: str | None = None  # runs holding a step of this key
    step_class: str | None = None  # runs holding a step of this class
    writes: str | None = None  # runs holding a write of this kind (WRITES)
    utilisation_min: float | None = None  # fractions: min inclusive, max exclusive, as the
    utilisation_max: float | None = None  # utilisation histogram's bins are
    id_prefix: str | None = None
    usd_exhausted: bool | None = None  # docs/metrics.md §11.5: true, or budgeted and not
    tokens_exhausted: bool | None = None
    cost_complete: bool | None = None  # False: runs whose cost is a lower bound (§11.4)
    cost_min: Decimal | None = None  # dollars: min inclusive, max exclusive, as utilisation
    cost_max: Decimal | None = None
    sort: str = "start"
    descending: bool | None = None  # None: the column's usual order (SORTABLE)
    limit: int | None = None
    offset: int = 0

    def __post_init__(self) -> None:
        if self.sort not in SORTABLE:
            raise SearchError(f"cannot sort by {self.sort!r}; choose one of: "
                              f"{', '.join(SORTABLE)}")
        if self.limit is not None and self.limit < 1:
            raise SearchError(f"limit {self.limit} is not a positive number of runs")
        if self.offset < 0:
            raise SearchError(f"offset {self.offset} is negative")
        if self.writes is not None and self.writes not in WRITES:
            raise SearchError(f"no write filter {self.writes!r}; choose one of: "
                              f"{', '.join(WRITES)}")
        for bound in (self.cost_min, self.cost_max):
            if bound is not None and (not isinstance(bound, Decimal) or not bound.is_finite()
                                      or bound < 0):
                raise SearchError(f"cost {bound!r} is not an amount of dollars (0 or more)")

    def page(self, number: int, size: int) -> RunSearch:
        """The `number`-th page (from 1) of `size` runs."""
        return replace(self, limit=size, offset=(max(number, 1) - 1) * size)


@dataclass(frozen=True)
class Found:
    runs: pd.DataFrame  # the page asked for, in the runs report's columns
    total: int  # runs matching, before the limit and offset


def search_runs(con: Connection, filters: Filters, search: RunSearch) -> Found:
    rows = runs_report(con, filters)
    keep = pd.Series(True, index=rows.index)
    if search.outcomes:
        stated = rows["outcome"].fillna(NOT_STATED).astype(str).str.lower()
        keep &= stated.isin([outcome.lower() for outcome in search.outcomes])
    if search.exhausted is not None:
        keep &= rows["exhausted"].fillna(False).astype(bool) == search.exhausted
        keep &= rows["exhausted"].notna()
    if search.culprit:
        keep &= rows["culprit"] == search.culprit
    if search.holder:
        keep &= rows["holder"] == search.holder
    if search.utilisation_min is not None:
        keep &= rows["utilisation"] >= search.utilisation_min
    if search.utilisation_max is not None:
        keep &= rows["utilisation"] < search.utilisation_max
    if search.id_prefix:
        keep &= rows["run_id"].str.startswith(search.id_prefix.strip().lower())
    if search.step_key or search.step_class:
        holding = frame(con, "runs_with_steps", {**filters.parameters(),
                                                 "step_key": search.step_key,
                                                 "step_class": search.step_class})
        keep &= rows["run_id"].isin(holding["run_id"])
    if search.writes:
        holding = frame(con, "runs_with_writes", {
            **filters.parameters(), **{which: which == search.writes for which in WRITES}})
        keep &= rows["run_id"].isin(holding["run_id"])
    if search.cost_complete is not None:
        keep &= rows["cost_complete"].fillna(True).astype(bool) == search.cost_complete
    if search.cost_min is not None or search.cost_max is not None:
        keep &= rows["cost_usd"].map(lambda cost: _within(cost, search.cost_min,
                                                          search.cost_max)).astype(bool)
    if search.usd_exhausted is not None or search.tokens_exhausted is not None:
        # exhausted in that dimension, or budgeted in it and not (§11.5): as --exhausted is
        flags = frame(con, "cost_report", filters.parameters()).set_index("run_id")
        for wanted, column in ((search.usd_exhausted, "usd_exhausted"),
                               (search.tokens_exhausted, "tokens_exhausted")):
            if wanted is not None:
                flag = rows["run_id"].map(flags[column])
                keep &= flag.notna() & (flag.fillna(False).astype(bool) == wanted)
    matched = rows[keep]
    descending = SORTABLE[search.sort] if search.descending is None else search.descending
    # run_id breaks ties, so a page never shows a run twice or skips one
    ordered = matched.sort_values([search.sort, "run_id"], ascending=[not descending, True],
                                  na_position="last", kind="stable")
    end = None if search.limit is None else search.offset + search.limit
    return Found(ordered.iloc[search.offset:end].reset_index(drop=True), len(matched))


def _within(cost: object, least: Decimal | None, below: Decimal | None) -> bool:
    """A run's cost (exact dollars; None when it has none) in [least, below)."""
    if not isinstance(cost, Decimal):
        return False
    return (least is None or cost >= least) and (below is None or cost < below)


def step_keys(con: Connection) -> list[str]:
    """Every step key stored, all time: what a search by culprit, holder or step may name."""
    return [str(key) for key in frame(con, "step_keys", {})["step_key"].dropna()]


def shortest_unique_starts(run_ids: list[str], known: list[str], least: int = 8) -> list[str]:
    """Each of `run_ids` cut to the shortest start (at least `least` characters) that no other
    id of `known` (every run id, sorted) begins with, so that `budgetscope run` and the run
    view open it; an id that is the start of another (a trace's root run beside a run below
    it, `TRACE/SPAN`) stays whole, which opens it exactly."""
    import bisect

    out = []
    for run_id in run_ids:
        i = bisect.bisect_left(known, run_id)
        neighbours = [known[j] for j in (i - 1, i + 1) if 0 <= j < len(known)]
        if i < len(known) and known[i] != run_id:
            neighbours.append(known[i])
        shared = max((_common(run_id, other) for other in neighbours), default=0)
        out.append(run_id if shared >= len(run_id) else run_id[:max(least, shared + 1)])
    return out


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def run_ids(con: Connection) -> list[str]:
    """Every run id, sorted."""
    return [str(run_id) for run_id in frame(con, "run_ids", {})["run_id"]]
