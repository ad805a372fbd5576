"""Pure pandas for the Weekly report's page: its ISO weeks' bounds and labels, and the weekly
report's rows with, before each week's agents, a row over all of them (docs/metrics.md §7,
§11.9).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal

import numpy as np
import pandas as pd

from dashboard.summaries import quantile

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
