"""Pure pandas over what `queries` functions return: totals for a period, per-day series, the
runs worth reviewing, the holder × culprit matrix, table shapes. No SQL and no Streamlit; each
is a sum, count or reshaping of a query's rows, so the page shows the same numbers the queries
(and `budgetscope report`) give.
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
from queries.run_view import LOG_RECORDS_SHOWN, severity_label, short_body


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


def exhausted_runs_of(runs: pd.DataFrame, culprit: str | None, limit: int = 200
                      ) -> pd.DataFrame:
    """Exhausted runs whose culprit is `culprit`, the largest culprit share first; `culprit`
    is the culprit's number in its run (#3: the key is the one asked for), the holder is
    named whole (#9 tool:fetch_report)."""
    exhausted = runs[runs["exhausted"].fillna(False).astype(bool) & (runs["culprit"] == culprit)]
    columns = ["run_id", "agent", "start", "outcome", "utilisation", "culprit",
               "culprit_share", "holder"]
    ordered = exhausted.sort_values(["culprit_share", "start"], ascending=[False, False])
    shown = numbered(ordered).assign(culprit=[
        fmt.NO_VALUE if fmt.missing(n) else f"#{int(n)}" for n in ordered["culprit_step"]])
    return shown[columns].head(limit).reset_index(drop=True)


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


OTHER = "(other)"


@dataclass(frozen=True)
class HolderCulprit:
    """Exhausted runs by holder key × culprit key, on one shared key order (so that a key's
    own cell sits on the diagonal of both axes), the most frequent keys first, OTHER last."""
    keys: list[str]
    # one row per non-empty cell: holder, culprit, runs, same_call (of those runs, how many
    # had the holder be the very culprit step)
    cells: pd.DataFrame
    runs: int  # exhausted runs with a culprit and a holder
    same_call: int  # ... whose holder is the culprit itself (docs/metrics.md §4)
    same_key: int  # ... whose holder has the culprit's step key (the same call included)


def holder_culprit(runs: pd.DataFrame, top: int = 10) -> HolderCulprit:
    """Exhausted runs counted by holder key × culprit key; keys beyond the `top` most frequent
    are grouped as OTHER."""
    exhausted = runs[runs["exhausted"].fillna(False).astype(bool)]
    exhausted = exhausted[exhausted["culprit"].notna() & exhausted["holder"].notna()]
    if exhausted.empty:
        return HolderCulprit([], pd.DataFrame(columns=["holder", "culprit", "runs",
                                                       "same_call"]), 0, 0, 0)
    counts = pd.concat([exhausted["culprit"], exhausted["holder"]]).value_counts()
    # by frequency, ties by key: one order for both axes
    ranked = sorted(counts.index, key=lambda key: (-int(counts[key]), str(key)))
    keep = set(ranked[:top])

    def bucket(key: str) -> str:
        return key if key in keep else OTHER

    same_call = (exhausted["culprit_step"] == exhausted["holder_step"]).fillna(False)
    frame = pd.DataFrame({"holder": exhausted["holder"].map(bucket),
                          "culprit": exhausted["culprit"].map(bucket),
                          "same_call": same_call.astype(int)})
    cells = frame.groupby(["holder", "culprit"], sort=False).agg(
        runs=("same_call", "size"), same_call=("same_call", "sum")).reset_index()
    keys = [key for key in ranked if key in keep]
    if (frame[["holder", "culprit"]] == OTHER).any(axis=None):
        keys.append(OTHER)
    same_key = int((exhausted["culprit"] == exhausted["holder"]).sum())
    return HolderCulprit(keys, cells, len(exhausted), int(same_call.sum()), same_key)


def run_steps_table(steps: pd.DataFrame, summary: pd.Series) -> pd.DataFrame:
    """The run view's steps table: one row per step in waterfall order."""
    budget = summary.get("budget_ms")
    share = steps["consumption_ms"] / float(budget) if not fmt.missing(budget) else np.nan
    # only an exhausted run has a culprit; elsewhere the step spent the most, nothing more
    exhausted = summary.get("exhausted")
    spender = "culprit" if not fmt.missing(exhausted) and bool(exhausted) else \
        "largest consumer"
    marks = np.where(steps["span_id"] == summary.get("culprit_span_id"), spender, "")
    marks = np.where(steps["span_id"] == summary.get("holder_span_id"),
                     np.where(marks == spender, f"{spender} + holder", "holder"), marks)
    return pd.DataFrame({
        # the step's number, as culprit and holder are named (#3, and 3.1 inside it)
        "#": steps["number"].astype(str),
        "step": ["  " * int(level) + ("└ " if level else "") + str(key)
                 for key, level in zip(steps["step_key"], steps["step_level"], strict=True)],
        "class": steps["step_class"],
        # what recognised it as a step (the conventions of docs/conventions.md: budget, otel_genai,
        # http, ...)
        "from": steps["convention"].map(fmt.text),
        "role": marks,
        "start": steps["offset_ms"].map(lambda v: f"+{fmt.duration(v)}"),
        "duration": steps["duration_ms"].map(fmt.duration),
        "share": share * 100,  # drawn as a bar with one decimal (docs/metrics.md §4)
        "allocated": steps["allocated_ms"].map(fmt.duration),
        "utilisation": steps["utilisation"].map(fmt.percent),
        # Text, with the one "no value" mark, never Python's None
        "effect status": steps["effect_status"].map(fmt.text),
        "idempotency key": steps["idempotency_key"].map(fmt.text),
        "attempt": steps["attempt"].map(lambda v: fmt.text(v if fmt.missing(v) else int(v))),
        "span id": steps["span_id"],
    })


def run_log_table(log_records: pd.DataFrame, summary: pd.Series) -> pd.DataFrame:
    """The run view's log records: time from the run's start, severity, the span (its step key
    when it is a step), body (cut short) and exception type; at most LOG_RECORDS_SHOWN."""
    shown = log_records.head(LOG_RECORDS_SHOWN)
    start = float(summary["start_ns"])
    return pd.DataFrame({
        "at": [f"{'+' if t >= start else '-'}{fmt.duration(abs(t - start) / 1e6)}"
               for t in shown["time_ns"].astype(float)],
        "severity": [severity_label(n, t) for n, t in
                     zip(shown["severity_number"], shown["severity_text"], strict=True)],
        "span": [key if isinstance(key, str) else (span if isinstance(span, str) else "–")
                 for key, span in zip(shown["step_key"], shown["span_id"], strict=True)],
        "body": shown["body"].map(short_body),
        "exception": shown["exception_type"].map(fmt.text),
    })


# ---- the weekly report's page -------------------------------------------------------------

ALL_AGENTS = "all agents"  # the agent cell of a week's row over every agent

_SUMMED = ("runs", "budgeted_runs", "exhausted_runs", "steps", "client_timeouts",
           "upstream_errors", "refused", "write_steps", "reconciled_writes", "orphan_writes",
           # docs/metrics.md §11.9's counts
           "tokens", "incomplete_cost_runs", "unpriced_steps", "unmetered_billable_steps",
           "usd_budgeted_runs", "usd_exhausted_runs", "token_budgeted_runs",
           "token_exhausted_runs")


def week_bounds(week: str) -> tuple[dt.datetime, dt.datetime]:
    """An ISO week `2026-W47` as [Monday 00:00 UTC, the next Monday)."""
    year, number = week.split("-W")
    monday = dt.datetime.combine(dt.date.fromisocalendar(int(year), int(number), 1),
                                 dt.time(), dt.UTC)
    return monday, monday + dt.timedelta(weeks=1)


PARTIAL_MARK = "*"  # after a week the range or the present cuts short


def week_label(week: str, partial: bool, since: dt.datetime | None = None,
               until: dt.datetime | None = None) -> str:
    """A week as the page's tables name it, short enough to leave their columns whole at
    1400 px: `W47 Nov 16–22`, the ISO week and its days; a week the range or the present cuts
    short names the days it counts and is marked, `W48 Nov 23–25*`."""
    start, end = week_bounds(week)
    first, stop = start, end
    if partial:
        first = max(start, since) if since is not None else start
        stop = min(end, until) if until is not None else end
    last = max(first, stop - dt.timedelta(microseconds=1))
    return f"W{week.split('-W')[1]} {_days(first, last)}" + (PARTIAL_MARK if partial else "")


def _days(first: dt.datetime, last: dt.datetime) -> str:
    if first.date() == last.date():
        return f"{last:%b} {last.day}"
    if first.month == last.month:
        return f"{last:%b} {first.day}–{last.day}"
    return f"{first:%b} {first.day}–{last:%b} {last.day}"


def _iso_weeks(starts: pd.Series) -> pd.Series:
    """Each run's ISO week (`2026-W47`) from its report's `start`."""
    iso = pd.to_datetime(starts, utc=True, format="ISO8601").dt.isocalendar()
    return iso["year"].astype(str) + "-W" + iso["week"].astype(int).map("{:02d}".format)


def _dollar_sum(values: pd.Series) -> Decimal | None:
    known = [v for v in values if isinstance(v, Decimal)]
    return sum(known, Decimal(0)) if known else None


def _cost_over_agents(of_week: pd.DataFrame, whole: dict[str, object], cost: pd.DataFrame,
                      top: pd.DataFrame) -> dict[str, object]:
    """The weekly report's cost columns (docs/metrics.md §11.9) over all of a week's agents:
    the week's cost summed exactly, rates divided again, percentiles over the week's runs
    (`cost`, the cost report's rows of that week), the largest dollar share from the cost
    attribution of the week's days (`top`). A weekly budget is an agent's: the row over all
    agents has one only when every agent of the week has one (their sum), else none."""
    runs = int(whole["usd_budgeted_runs"])  # type: ignore[call-overload]
    exhausted = int(whole["usd_exhausted_runs"])  # type: ignore[call-overload]
    spent = top[top["budget_share"] > 0] if not top.empty else top
    budgets = of_week["weekly_budget_usd"]
    budget = _dollar_sum(budgets) if budgets.notna().all() else None
    cost_usd = _dollar_sum(of_week["cost_usd"])
    return {
        "cost_usd": cost_usd,
        "usd_exhaustion_rate": exhausted / runs if runs else np.nan,
        "cost_utilisation_p50": quantile(cost["cost_utilisation"], 0.50),
        "cost_utilisation_p90": quantile(cost["cost_utilisation"], 0.90),
        "cost_utilisation_p99": quantile(cost["cost_utilisation"], 0.99),
        "overrun_usd": _dollar_sum(of_week["overrun_usd"]),
        "top_cost_culprit": None if spent.empty else str(spent.iloc[0]["step_key"]),
        "top_cost_culprit_share": (np.nan if spent.empty
                                   else float(spent.iloc[0]["budget_share"])),
        "token_utilisation_p90": quantile(cost["token_utilisation"], 0.90),
        "weekly_budget_usd": budget,
        "weekly_budget_utilisation": (float(cost_usd or 0) / float(budget)
                                      if budget else np.nan),
    }


def weekly_with_all_agents(weekly: pd.DataFrame, runs: pd.DataFrame,
                           attribution_of: Callable[[dt.datetime, dt.datetime], pd.DataFrame],
                           since: dt.datetime | None = None,
                           until: dt.datetime | None = None,
                           cost: pd.DataFrame | None = None,
                           cost_attribution_of: Callable[[dt.datetime, dt.datetime],
                                                         pd.DataFrame] | None = None
                           ) -> pd.DataFrame:
    """The weekly report's rows with, before each week's agents, a row over all of them
    (agent ALL_AGENTS): counts summed, rates divided again, utilisation percentiles over the
    week's runs (`runs`, the runs report of the same filters) and the largest share from the
    attribution report of the week's days in range (`attribution_of(start, end)`), each by
    the weekly report's own definition (docs/metrics.md §7); likewise its cost columns (§11.9)
    from `cost` (the cost report of the same filters) and `cost_attribution_of`. The CSV stays
    the report's own rows; this is the page's table only."""
    if weekly.empty:
        return weekly
    run_week = _iso_weeks(runs["start"])
    cost_week = _iso_weeks(cost["start"]) if cost is not None else None
    rows = []
    for week, of_week in weekly.groupby("week", sort=True):
        whole = {column: int(of_week[column].sum()) for column in _SUMMED
                 if column in of_week}
        utilisation = runs.loc[run_week == week, "utilisation"]
        first, end = week_bounds(str(week))
        days = (max(first, since) if since else first, min(end, until) if until else end)
        top = attribution_of(*days)
        if cost is not None and cost_attribution_of is not None:
            whole.update(_cost_over_agents(of_week, whole, cost[cost_week == week],
                                           cost_attribution_of(*days)))
        whole.update(
            week=week, agent=ALL_AGENTS,
            exhaustion_rate=(whole["exhausted_runs"] / whole["budgeted_runs"]
                             if whole["budgeted_runs"] else np.nan),
            utilisation_p50=quantile(utilisation, 0.50),
            utilisation_p90=quantile(utilisation, 0.90),
            utilisation_p99=quantile(utilisation, 0.99),
            reconciliation_rate=(whole["reconciled_writes"] / whole["write_steps"]
                                 if whole["write_steps"] else np.nan),
            top_culprit=None if top.empty else str(top.iloc[0]["step_key"]),
            top_culprit_share=np.nan if top.empty else float(top.iloc[0]["budget_share"]),
            partial_week=bool(of_week["partial_week"].fillna(False).astype(bool).any()))
        rows.append(pd.DataFrame([whole]))
        rows.append(of_week)
    return pd.concat(rows, ignore_index=True)[list(weekly.columns)]
