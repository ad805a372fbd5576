"""Pure pandas over what `queries` functions return, for the Overview and the run lists other
pages share: totals for a period, per-day (or per-hour) series, the runs worth reviewing, runs
named by their numbered culprit and holder, a run's label in a selectbox. No SQL and no
Streamlit; each is a sum, count or reshaping of a query's rows, so the page shows the same
numbers the queries (and `budgetscope report`) give.

The same kind of reductions for other pages live beside this one: attribution_summaries (holder
× culprit), run_summaries (one run's tables), weekly_summaries (the weekly report's rows),
cost_summaries (the cost reports).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pandas as pd

from dashboard import fmt
from queries.run_story import step_name


def quantile(values: pd.Series, q: float) -> float:
    """Linear interpolation, as DuckDB's quantile_cont and numpy's default (docs/metrics.md §5)."""
    data = values.dropna().to_numpy(dtype=float)
    return float(np.quantile(data, q)) if data.size else float("nan")


@dataclass(frozen=True)
class PeriodTotals:
    runs: int
    exhausted_runs: int
    exhaustion_rate: float
    utilisation_p50: float
    utilisation_p99: float
    client_timeouts: int
    upstream_errors: int
    write_steps: int
    reconciled_writes: int
    reconciliation_rate: float
    orphan_writes: int
    steps: int = 0
    # Per 100 steps (per 100 write steps for orphans): periods with different traffic compare
    # by these, not by their counts.
    client_timeouts_per_100_steps: float = float("nan")
    upstream_errors_per_100_steps: float = float("nan")
    orphan_writes_per_100_writes: float = float("nan")
    # docs/metrics.md §11: Σ known cost (exact dollars), the runs whose cost is a lower bound,
    # dollar exhaustion over the runs budgeted in dollars, tokens, unpriced top-level steps
    cost_usd: Decimal = Decimal(0)
    incomplete_cost_runs: int = 0
    usd_budgeted_runs: int = 0
    usd_exhausted_runs: int = 0
    usd_exhaustion_rate: float = float("nan")
    tokens: int = 0
    unpriced_steps: int = 0


def period_totals(headline: pd.DataFrame) -> PeriodTotals:
    """Overview numbers for one period from its headline row (queries.reports.headline, the
    query /metrics and `check` read too); only the per-100 figures are worked out here."""
    row = headline.iloc[0]

    def number(name: str) -> float:
        return float("nan") if pd.isna(row[name]) else float(row[name])

    def per_100(part: int, whole: int) -> float:
        return 100 * part / whole if whole else float("nan")

    steps, writes = int(row["steps"]), int(row["write_steps"])
    client_timeouts, upstream_errors = int(row["client_timeouts"]), int(row["upstream_errors"])
    orphans = int(row["orphan_writes"])
    return PeriodTotals(
        runs=int(row["runs"]),
        exhausted_runs=int(row["exhausted_runs"]),
        exhaustion_rate=number("exhaustion_rate"),
        utilisation_p50=number("utilisation_p50"),
        utilisation_p99=number("utilisation_p99"),
        client_timeouts=client_timeouts,
        upstream_errors=upstream_errors,
        write_steps=writes,
        reconciled_writes=int(row["reconciled_writes"]),
        reconciliation_rate=number("reconciliation_rate"),
        orphan_writes=orphans,
        steps=steps,
        client_timeouts_per_100_steps=per_100(client_timeouts, steps),
        upstream_errors_per_100_steps=per_100(upstream_errors, steps),
        orphan_writes_per_100_writes=per_100(orphans, writes),
        cost_usd=Decimal(int(row["cost_nano"])).scaleb(-9),
        incomplete_cost_runs=int(row["incomplete_cost_runs"]),
        usd_budgeted_runs=int(row["usd_budgeted_runs"]),
        usd_exhausted_runs=int(row["usd_exhausted_runs"]),
        usd_exhaustion_rate=number("usd_exhaustion_rate"),
        tokens=int(row["tokens"]),
        unpriced_steps=int(row["unpriced_steps"]),
    )


# A range up to this long is bucketed by hour, longer ones by UTC day.
HOURLY_UP_TO = dt.timedelta(hours=48)
TREND_COLUMNS = ["bucket", "runs", "budgeted_runs", "exhausted_runs", "exhaustion_rate",
                 "utilisation_p50", "utilisation_p99"]


# Buckets of a trend drawn over its whole range (ten years of days); a longer range is drawn
# over the span of its runs.
MOST_BUCKETS = 3_660


def trend_bucket(since: dt.datetime | None, until: dt.datetime | None) -> str:
    """"hour" for a range of up to two days (a "Last 24 hours" reads by the hour), else "day"."""
    if since is not None and until is not None and until - since <= HOURLY_UP_TO:
        return "hour"
    return "day"


def daily(runs: pd.DataFrame, since: dt.datetime | None = None,
          until: dt.datetime | None = None, bucket: str | None = None) -> pd.DataFrame:
    """Per UTC day (or hour, see trend_bucket) of run start over the whole range [since,
    until): runs, budgeted and exhausted runs, exhaustion rate, utilisation p50/p99. A bucket
    without runs is there with 0 runs (and no rates: nothing to divide by), so that an agent
    that stopped shows as a gap at zero instead of disappearing. Without a bound, the range
    ends at the first (last) run's bucket."""
    bucket = bucket or trend_bucket(since, until)
    freq = "h" if bucket == "hour" else "D"
    if runs.empty and (since is None or until is None):
        return pd.DataFrame(columns=TREND_COLUMNS)
    starts = pd.to_datetime(runs["start"], utc=True, format="ISO8601")
    # Microseconds, not nanoseconds: pandas' nanosecond timestamps end in 2262, and a link
    # may say until=9999-12-31.
    first = pd.Timestamp(since) if since is not None else starts.min()
    last = pd.Timestamp(until) - pd.Timedelta(1, "us") if until is not None else starts.max()
    first, last = (t.tz_convert("UTC") if t.tzinfo else t.tz_localize("UTC")
                   for t in (first, last))
    if last - first > pd.Timedelta(1, freq) * MOST_BUCKETS:
        # since=0001-01-01 would ask for 739,000 empty days: such a range is drawn over the
        # runs it holds.
        if runs.empty:
            return pd.DataFrame(columns=TREND_COLUMNS)
        first, last = max(first, starts.min()), min(last, starts.max())
    edges = pd.date_range(first.floor(freq), last.floor(freq), freq=freq)
    if not len(edges):
        return pd.DataFrame(columns=TREND_COLUMNS)
    # Grouped once, not a filter of every run per bucket: that loop took ~0.17 s of the
    # overview's 35 days on 5k runs (pandas work that holds the GIL the page's static files
    # are served under).
    buckets = starts.dt.floor(freq)
    budgeted = runs["budget_ms"].notna().to_numpy()
    exhausted = runs["exhausted"].fillna(False).astype(bool).to_numpy()
    per_bucket = buckets.groupby(buckets).size()
    with_budget = pd.DataFrame({"bucket": buckets[budgeted].reset_index(drop=True),
                                "ex": exhausted[budgeted],
                                "utilisation": runs["utilisation"].to_numpy()[budgeted]})
    grouped = with_budget.groupby("bucket", sort=True)
    counted = grouped.size()
    exhausted_runs = grouped["ex"].sum()
    # The same quantile as the period totals (numpy's, per bucket), not pandas' own.
    p50 = grouped["utilisation"].agg(lambda values: quantile(values, 0.5))
    p99 = grouped["utilisation"].agg(lambda values: quantile(values, 0.99))
    runs_in = per_bucket.reindex(edges, fill_value=0).to_numpy()
    budgeted_in = counted.reindex(edges, fill_value=0).to_numpy()
    exhausted_in = exhausted_runs.reindex(edges, fill_value=0).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(budgeted_in > 0, exhausted_in / np.maximum(budgeted_in, 1), np.nan)
    return pd.DataFrame({
        "bucket": edges, "runs": runs_in.astype("int64"),
        "budgeted_runs": budgeted_in.astype("int64"),
        "exhausted_runs": exhausted_in.astype("int64"), "exhaustion_rate": rate,
        "utilisation_p50": p50.reindex(edges).to_numpy(dtype=float),
        "utilisation_p99": p99.reindex(edges).to_numpy(dtype=float)}, columns=TREND_COLUMNS)


def runs_worth_reviewing(runs: pd.DataFrame, limit: int = 25) -> pd.DataFrame:
    """Exhausted runs and runs that overran, worst first: those that overran the deadline
    most, then the highest utilisation; then a culprit that is not the holder."""
    if runs.empty:
        return runs.head(0)
    frame = runs.copy()
    frame["exhausted"] = frame["exhausted"].fillna(False).astype(bool)
    overran = frame["overrun_ms"].fillna(0) > 0
    frame = frame[frame["exhausted"] | overran | (frame["outcome"] == "failed")]
    frame = frame.assign(culprit_is_holder=frame["culprit"] == frame["holder"])
    frame = frame.sort_values(["overrun_ms", "utilisation", "start"],
                              ascending=[False, False, False], na_position="last")
    return frame.head(limit).reset_index(drop=True)


def numbered(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs report with `culprit` and `holder` named as one run's steps are everywhere:
    `#3 tool:fetch_report` (docs/metrics.md §4), text with the no-value mark, for a table."""
    return runs.assign(**{
        role: [step_name(number, key) or fmt.NO_VALUE for number, key in zip(
            runs[f"{role}_step"], runs[role], strict=True)]
        for role in ("culprit", "holder")})


def describe_run(frame: pd.DataFrame, exhausted_only: bool = False) -> Callable[[str], str]:
    """A selectbox label for a run id (plain text: selectbox options are never Markdown).
    `exhausted_only`: every run of `frame` is exhausted (its step that spent the most is its
    culprit) though the frame has no `exhausted` column."""
    by_id = frame.set_index("run_id")

    def label(run_id: str) -> str:
        if run_id not in by_id.index:
            return run_id
        row = by_id.loc[run_id]
        spent = ""
        if "culprit" in row and not fmt.missing(row["culprit"]):
            exhausted = exhausted_only or (not fmt.missing(row.get("exhausted"))
                                           and bool(row.get("exhausted")))
            name = str(row["culprit"]) if str(row["culprit"]).startswith("#") else step_name(
                row.get("culprit_step"), row["culprit"])
            spent = f"  {'culprit' if exhausted else 'largest consumer'} {name}"
        return (f"{run_id[:16]}…  {fmt.text(row['agent'])}  {fmt.instant(row['start'])}  "
                f"{fmt.text(row['outcome'])}  "
                f"utilisation {fmt.percent(row['utilisation'])}" + spent)

    return label
