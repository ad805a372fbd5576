"""Pure pandas over the cost reports (queries.reports: cost, cost_attribution, weekly, models,
headline, pricing_coverage) for the Cost page, the Overview's spend and the weekly page's row
over all agents: no SQL and no Streamlit, each a count, sum, percentile or reshaping of a
report's rows, so that the page shows the numbers `budgetscope report` gives
(docs/metrics.md §11).

Dollars stay exact (Decimal, queries/money.py) wherever they are shown or summed; a chart draws
them as floats, which only positions a mark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pandas as pd

from dashboard import fmt
from dashboard.attribution_summaries import HolderCulprit, holder_culprit
from dashboard.summaries import quantile
from queries import run_cost

USD, TOKENS = "usd", "tokens"
DIMENSIONS = (USD, TOKENS)


@dataclass(frozen=True)
class Dimension:
    """The cost report's columns for one budget dimension (docs/metrics.md §11.5-§11.7)."""

    name: str  # usd or tokens
    budget: str
    utilisation: str
    exhausted: str
    culprit: str
    crosser: str


COST = Dimension(USD, "usd_budget", "cost_utilisation", "usd_exhausted", "cost_culprit",
                 "cost_crosser")
TOKEN = Dimension(TOKENS, "token_budget", "token_utilisation", "tokens_exhausted",
                  "token_culprit", "token_crosser")
BY_NAME = {d.name: d for d in (COST, TOKEN)}

# Bins of the utilisation histograms: 5 % wide, as the time utilisation's
# (queries.reports.utilisation_histogram).
BIN_WIDTH = 0.05
PERCENTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


def _budgeted(cost: pd.DataFrame, d: Dimension) -> pd.DataFrame:
    """The runs with a known budget in that dimension and a utilisation: what §11.7's
    percentiles count (runs whose cost is a lower bound included)."""
    return cost[cost[d.budget].notna() & cost[d.utilisation].notna()]


def utilisation_percentiles(cost: pd.DataFrame, d: Dimension) -> pd.DataFrame:
    """Per agent: runs with a known budget, p50/p90/p95/p99 and max of their utilisation in
    dimension `d` (linear interpolation, docs/metrics.md §5), incomplete costs counted among
    them (`incomplete`: how many are lower bounds)."""
    rows = []
    for agent, runs in _budgeted(cost, d).groupby("agent", dropna=False, sort=True):
        values = runs[d.utilisation].astype(float)
        row = {"agent": agent, "runs": len(runs),
               **{p: quantile(values, q) for p, q in PERCENTILES.items()},
               "max": float(values.max())}
        if d is COST:
            row["incomplete"] = int((~runs["cost_complete"].fillna(True).astype(bool)).sum())
        rows.append(row)
    columns = ["agent", "runs", *PERCENTILES, "max", *(["incomplete"] if d is COST else [])]
    return pd.DataFrame(rows, columns=columns)


def utilisation_histogram(cost: pd.DataFrame, d: Dimension,
                          bin_width: float = BIN_WIDTH) -> pd.DataFrame:
    """Runs per agent per utilisation bin [bin_start, bin_end) of dimension `d`, as
    queries.reports.utilisation_histogram bins the time utilisation."""
    runs = _budgeted(cost, d)
    if runs.empty:
        return pd.DataFrame(columns=["agent", "bin_start", "bin_end", "runs"])
    start = np.floor(runs[d.utilisation].to_numpy(dtype=float) / bin_width) * bin_width
    binned = pd.DataFrame({"agent": runs["agent"].to_numpy(), "bin_start": start})
    counted = binned.groupby(["agent", "bin_start"], dropna=False, sort=True).size()
    out = counted.reset_index(name="runs")
    out.insert(2, "bin_end", out["bin_start"] + bin_width)
    return out[["agent", "bin_start", "bin_end", "runs"]]


_STEP = re.compile(r"^#(?P<number>\d+) (?P<key>.*)$", re.DOTALL)


def step_parts(named: object) -> tuple[int | None, str | None]:
    """`#3 model:gpt-4o` (the cost report's culprit and crosser cells, §4's form) as (3,
    'model:gpt-4o'); (None, None) for an empty cell."""
    if not isinstance(named, str) or not named:
        return None, None
    found = _STEP.match(named)
    return (int(found["number"]), found["key"]) if found else (None, named)


def crosser_culprit(cost: pd.DataFrame, d: Dimension = COST, top: int = 10) -> HolderCulprit:
    """The exhausted runs of dimension `d` that have a culprit and a crosser, counted by
    crosser key × culprit key (attribution_summaries.holder_culprit's matrix, the crosser in
    the holder's place): on the diagonal the crosser has the culprit's key; `same_call` counts
    the runs whose crosser is the culprit itself, the cost_culprit_is_crosser_rate's
    numerator."""
    exhausted = cost[cost[d.exhausted].fillna(False).astype(bool)]
    culprit = [step_parts(v) for v in exhausted[d.culprit]]
    crosser = [step_parts(v) for v in exhausted[d.crosser]]
    frame = pd.DataFrame({
        "exhausted": True,
        "culprit": [key for _, key in culprit], "culprit_step": [n for n, _ in culprit],
        "holder": [key for _, key in crosser], "holder_step": [n for n, _ in crosser]},
        index=exhausted.index)
    return holder_culprit(frame, top)


def weekly_spend(weekly: pd.DataFrame) -> pd.DataFrame:
    """Per ISO week and agent (the weekly report's rows): the week's cost, its runs whose cost
    is a lower bound, the agent's weekly dollar budget and the share of it spent."""
    return weekly[["week", "agent", "partial_week", "runs", "cost_usd", "incomplete_cost_runs",
                   "weekly_budget_usd", "weekly_budget_utilisation"]].reset_index(drop=True)


SOURCES = ("reported", "override", "bundled", "unpriced")


def spend_by_source(models: pd.DataFrame) -> pd.DataFrame:
    """The models report summed per price source (docs/metrics.md §11.3): metered calls,
    tokens and known cost; unpriced calls carry no cost (unknown, never 0)."""
    rows = []
    for source in SOURCES:
        part = models[models["price_source"] == source]
        tokens = part["input_tokens"].fillna(0).sum() + part["output_tokens"].fillna(0).sum()
        known = [v for v in part["cost_usd"] if isinstance(v, Decimal)]
        rows.append({"price_source": source, "spans": int(part["spans"].sum()),
                     "tokens": int(tokens),
                     "cost_usd": sum(known, Decimal(0)) if source != "unpriced" else None})
    return pd.DataFrame(rows, columns=["price_source", "spans", "tokens", "cost_usd"])


def dollars(value: object) -> Decimal | None:
    """A headline's amount (integer nano-dollars, as queries.reports.headline hands them over)
    as exact dollars."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return Decimal(int(value)).scaleb(-9)


def run_step_costs(steps: pd.DataFrame) -> pd.DataFrame:
    """The run view's cost by step: each step with usage (and each model step that sent none
    but may have been billed), in waterfall order, with its tokens split as docs/metrics.md
    §11.1 counts them (in with its cache / cache read / cache write / out with its reasoning /
    reasoning), its cost (`≥` a lower bound, `unknown` unpriced, `no usage`) and where the cost
    came from, in the words `budgetscope run` uses (queries.run_cost.step_costs)."""
    rows = run_cost.step_costs(steps)
    columns = ["#", "step", "in", "cache read", "cache write", "out", "reasoning", "tokens",
               "cost", "from"]
    if not rows:
        return pd.DataFrame(columns=columns)
    by_number = steps.assign(number=steps["number"].astype(str)).set_index("number")
    split = {label: [fmt.count(by_number.at[row.number, column]) if row.tokens else ""
                     for row in rows]
             for label, column in (("in", "input_tokens"), ("cache read", "cache_read_tokens"),
                                   ("cache write", "cache_write_tokens"),
                                   ("out", "output_tokens"),
                                   ("reasoning", "reasoning_tokens"))}
    return pd.DataFrame({
        "#": [row.number for row in rows],
        "step": ["  " * row.level + ("└ " if row.level else "") + row.key for row in rows],
        **split,
        "tokens": [row.tokens for row in rows],
        "cost": [row.cost for row in rows],
        "from": [row.source or fmt.NO_VALUE for row in rows]}, columns=columns)
