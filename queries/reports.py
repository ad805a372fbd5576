"""The aggregate reports of docs/metrics.md §4-§8 as typed functions: connection and filters in,
DataFrame out, columns in the order docs/metrics.md §7/§8 lists them. The CLI and the dashboard both
call these.

`con` is a DuckDB connection or a ClickHouse backend (store.clickhouse): loader.frame runs the
query of the same name in the connection's dialect, with the same output columns."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

import pandas as pd

from queries.filters import Filters, epoch_ns
from queries.loader import Connection, frame, frames
from queries.money import with_dollars

NO_FILTERS = Filters()


def _frame(con: Connection, name: str, filters: Filters,
           **extra: object) -> pd.DataFrame:
    return frame(con, name, {**filters.parameters(), **extra})


def _with_dollars(rows: pd.DataFrame) -> pd.DataFrame:
    """The report's amounts (its `*_usd` and `usd_budget` columns, integer nano-dollars in the
    query) as exact dollars (queries/money.py): what CSV, JSON and tables write."""
    return with_dollars(rows, [c for c in rows.columns
                               if str(c).endswith("_usd") or c == "usd_budget"])


def runs(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """One row per run (docs/metrics.md §8 `runs`), ending with its tokens and cost (§11.4)."""
    return _with_dollars(_frame(con, "runs_report", filters))


def attribution(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Budget share, culprit and holder runs per step key over exhausted runs
    (docs/metrics.md §4)."""
    return _frame(con, "attribution_report", filters)


def attribution_summary(con: Connection,
                        filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """One row: exhausted runs, culprit_is_holder_rate, unattributed share (docs/metrics.md §4)."""
    return _frame(con, "attribution_summary", filters)


def failures(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Steps per step key by docs/metrics.md §3 class."""
    return _frame(con, "failures_report", filters)


def utilisation(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Run utilisation percentiles per agent (docs/metrics.md §5)."""
    return _frame(con, "utilisation_report", filters)


def utilisation_histogram(con: Connection, filters: Filters = NO_FILTERS,
                          bin_width: float = 0.05) -> pd.DataFrame:
    """Runs per agent per utilisation bin [bin_start, bin_end)."""
    if not bin_width > 0:
        raise ValueError("bin_width must be positive")
    return _frame(con, "utilisation_histogram", filters, bin_width=bin_width)


def step_utilisation(con: Connection,
                     filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Step duration / allocated_ms percentiles per step key (docs/metrics.md §5)."""
    return _frame(con, "step_utilisation", filters)


def reconciliation(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Write steps, reconciliation and orphans per step key (docs/metrics.md §6)."""
    return _frame(con, "reconciliation_report", filters)


def reconciliation_by_period(con: Connection,
                             filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Write steps, reconciliation rate and orphans per UTC day (with its ISO week) and step
    key (docs/metrics.md §6)."""
    return _frame(con, "reconciliation_by_period", filters)


def weekly(con: Connection, filters: Filters = NO_FILTERS,
           now: dt.datetime | None = None) -> pd.DataFrame:
    """One row per ISO week × agent (docs/metrics.md §7); `partial_week` compares each week with the
    filter's range and with `now` (default: the present)."""
    return _with_dollars(_frame(con, "weekly_report", filters, **_weekly_now(now)))


def _weekly_now(now: dt.datetime | None) -> dict[str, int]:
    return {"now_ns": epoch_ns(now or dt.datetime.now(dt.UTC))}


# docs/metrics.md §11.6: attribution in each of the two other dimensions.
USD, TOKENS = "usd", "tokens"
DIMENSIONS = (USD, TOKENS)


def cost(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """One row per run: its tokens, dollars, both budgets, culprits and crossers
    (docs/metrics.md §11.9 `report cost`)."""
    return _with_dollars(_frame(con, "cost_report", filters))


def cost_attribution(con: Connection, filters: Filters = NO_FILTERS,
                     dimension: str = USD) -> pd.DataFrame:
    """Budget share, culprit and crosser runs per step key over the runs that exhausted their
    dollar budget, or (dimension "tokens") their token budget (§11.6)."""
    return _frame(con, "cost_attribution_report", filters, **_dimension(dimension))


def _dimension(dimension: str) -> dict[str, str]:
    if dimension not in DIMENSIONS:
        raise ValueError(f"dimension {dimension!r}: choose one of {', '.join(DIMENSIONS)}")
    return {"dimension": dimension}


def token_attribution(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """`cost_attribution` over the token-exhausted runs: `report cost-attribution
    --dimension tokens`, under a name of its own for the dashboard's download."""
    return cost_attribution(con, filters, TOKENS)


def cost_attribution_summary(con: Connection, filters: Filters = NO_FILTERS,
                             dimension: str = USD) -> pd.DataFrame:
    """One row over the dollar- (or token-) exhausted runs: exhausted_runs, crossed_runs,
    culprit_is_crosser_rate, unattributed_share (§11.6)."""
    return _frame(con, "cost_attribution_summary", filters, **_dimension(dimension))


def token_attribution_summary(con: Connection,
                              filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """`cost_attribution_summary` over the token-exhausted runs."""
    return cost_attribution_summary(con, filters, TOKENS)


def models(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Metered spans, tokens and known cost per pricing model, provider and price source
    (§11.9 `report models`)."""
    return _with_dollars(_frame(con, "models_report", filters))


def pricing_coverage(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """One row: model steps, how many are metered (and the share), unmetered and possibly
    billed; the runs whose framework reported its own total, Σ those totals and Σ our cost of
    the same runs, in dollars (docs/metrics.md §11.2, §11.4)."""
    return _with_dollars(_frame(con, "pricing_coverage", filters))


def headline(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """One row: the headline counts, rates and utilisation percentiles (sql/headline.sql), the
    one definition the Overview, /metrics and `check` (queries.signals) read."""
    rows = _frame(con, "headline", filters)
    assert len(rows) == 1  # an aggregate without GROUP BY always returns one row
    for column in ("tokens", "cost_nano"):  # exact sums, handed over as their decimal text
        rows[column] = pd.Series([int(value) for value in rows[column]], dtype=object)
    return rows


def database_status(con: Connection,
                    filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """One row: spans, runs, newest_received, traces_pending_derivation, traces_failed_derivation
    (filters unused)."""
    del filters
    return frame(con, "database_status", {})


def runs_by_agent(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """All-time `agent`, `runs`, `newest_start_ns` (filters unused): the dashboard sidebar."""
    del filters
    return frame(con, "runs_by_agent", {})


def failures_daily(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Steps per UTC day of run start, one column per docs/metrics.md §3 class."""
    return _frame(con, "failures_daily", filters)


def tool_latency(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Every tool call (refused ones aside): step_key, duration_ms, cap_ms, class."""
    return _frame(con, "tool_latency", filters)


def attribution_completed(con: Connection,
                          filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Budget share per step key over budgeted runs that were not exhausted."""
    return _frame(con, "attribution_completed", filters)


def orphan_writes(con: Connection, filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Uncertain writes nobody read back: run_id, step_key, idempotency_key, start, agent."""
    return _frame(con, "orphan_writes", filters)


Report = Callable[[Connection, Filters], pd.DataFrame]

# Every report by name: what the dashboard's data.report(name) caches and draws.
ALL: dict[str, Report] = {report.__name__: report for report in (
    runs, attribution, attribution_summary, failures, utilisation, utilisation_histogram,
    step_utilisation, reconciliation, reconciliation_by_period, weekly, headline,
    database_status, runs_by_agent, failures_daily, tool_latency, attribution_completed,
    orphan_writes, cost, cost_attribution, token_attribution, cost_attribution_summary,
    token_attribution_summary, models, pricing_coverage)}

# The reports `budgetscope report NAME` knows, in the order its help lists them.
REPORTS: dict[str, Report] = {
    **{name: ALL[name] for name in (
        "weekly", "runs", "attribution", "failures", "utilisation", "reconciliation", "cost")},
    "cost-attribution": cost_attribution,  # --dimension tokens: token_attribution
    "models": models,
}
# The query each of them runs (each is that query's frame with the filters bound, its
# amounts made dollars: _with_dollars).
_REPORT_QUERIES = {"weekly": "weekly_report", "runs": "runs_report",
                   "attribution": "attribution_report", "failures": "failures_report",
                   "utilisation": "utilisation_report",
                   "reconciliation": "reconciliation_report", "cost": "cost_report",
                   "cost-attribution": "cost_attribution_report", "models": "models_report"}


# DuckDB vectors (2,048 rows each) a piece: every piece pays a fixed cost (a frame built, its
# amounts made dollars, its fields made), which at one vector was ~30 % of a report's CPU as
# CSV. Four: `report runs` of 50,000 runs as the CLI writes it 472 → 336 ms CPU (bench/README.md,
# "Tokens and dollars: the cost reports"), a piece still a few thousand rows of memory.
PIECE_VECTORS = 4


def report_pieces(con: Connection, name: str, filters: Filters = NO_FILTERS,
                  now: dt.datetime | None = None,
                  dimension: str = USD) -> Iterator[pd.DataFrame]:
    """Report `name` of REPORTS in pieces as the query hands them over (loader.frames): the
    same rows, columns and values as REPORTS[name] returns whole, for a CSV or JSON written as
    it is read, whatever the report's size. `dimension`: cost-attribution's (`--dimension`)."""
    extra = (_weekly_now(now) if name == "weekly"
             else _dimension(dimension) if name == "cost-attribution" else {})
    for piece in frames(con, _REPORT_QUERIES[name], {**filters.parameters(), **extra},
                        vectors=PIECE_VECTORS):
        yield _with_dollars(piece)
