"""`budgetscope check`: compare the recent signals with thresholds, for cron and CI.

Exit status: 0 when every threshold holds, 1 when one is breached (each breach is printed with
its value), 2 on a usage error or when the database cannot be read: a broken check must not
look like a page-worthy breach, nor like a pass.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

import click

from budgetscope.commands import links
from budgetscope.commands.common import (
    backend_option,
    db_option,
    no_database,
    open_reader,
    output_stream,
    require_known_agent,
    served_reader,
)
from budgetscope.commands.links import dashboard_url_option
from budgetscope.durations import Duration, window_label
from budgetscope.fail import Fail
from dashboard.filters import FilterState
from queries.filters import FilterError, Filters, parse_instant
from queries.loader import Connection
from queries.readable import plural
from queries.reports import weekly
from queries.signals import Signals, recent_signals
from queries.terminal import terminal_safe


class CheckError(Fail):
    """Usage or database problem: exit 2, distinct from a breach (1)."""

    exit_code = 2


@dataclass(frozen=True)
class Threshold:
    signal: str  # a Signals field
    bound: str  # "max" or "min"
    limit: float
    of: tuple[str, str] | None = None  # numerator and denominator shown beside a rate


# option name → (signal, bound, the counts that explain it)
_THRESHOLDS: dict[str, tuple[str, str, tuple[str, str] | None]] = {
    "max_exhaustion_rate": ("exhaustion_rate", "max", ("exhausted_runs", "budgeted_runs")),
    "max_reconciliation_rate": ("reconciliation_rate", "max",
                                ("reconciled_writes", "write_steps")),
    "min_reconciliation_rate": ("reconciliation_rate", "min",
                                ("reconciled_writes", "write_steps")),
    "max_client_timeout_rate": ("client_timeout_rate", "max", ("client_timeouts", "steps")),
    "max_upstream_error_rate": ("upstream_error_rate", "max", ("upstream_errors", "steps")),
    "max_orphan_writes": ("orphan_writes", "max", None),
    "min_runs": ("runs", "min", None),
    # docs/metrics.md §11: the other two budgets
    "max_usd_exhaustion_rate": ("usd_exhaustion_rate", "max",
                                ("usd_exhausted_runs", "usd_budgeted_runs")),
    "max_token_exhaustion_rate": ("token_exhaustion_rate", "max",
                                  ("token_exhausted_runs", "token_budgeted_runs")),
    "max_weekly_budget_utilisation": ("weekly_budget_utilisation", "max", None),
    "max_unpriced_steps": ("unpriced_steps", "max", None),
}
# Signals read as percentages although no pair of counts explains them (a ratio that may pass
# 100%: a weekly budget spent one and a half times is 150.0%).
_PERCENT_SIGNALS = frozenset({"weekly_budget_utilisation"})


# What lists the runs behind each signal: `report runs` options and the Runs page's search
# (dashboard/run_search_params.py), for the runs of the window.
_RUNS_BEHIND: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "exhaustion_rate": (("--exhausted", "--sort", "culprit_share:desc"),
                        {"exhausted": "yes", "sort": "culprit_share", "order": "desc"}),
    "client_timeout_rate": (("--step-class", "client_timeout"), {"class": "client_timeout"}),
    "upstream_error_rate": (("--step-class", "upstream_error"), {"class": "upstream_error"}),
    "orphan_writes": (("--writes", "orphan"), {"writes": "orphan"}),
    "runs": ((), {}),
    # docs/metrics.md §11: the runs that spent their budget, the most expensive first; the
    # runs whose cost is a lower bound; the window's runs by what they spent
    "usd_exhaustion_rate": (("--usd-exhausted", "--sort", "cost_usd:desc"),
                            {"usd_exhausted": "yes", "sort": "cost_usd", "order": "desc"}),
    "token_exhaustion_rate": (("--tokens-exhausted", "--sort", "tokens:desc"),
                              {"tokens_exhausted": "yes", "sort": "tokens", "order": "desc"}),
    "unpriced_steps": (("--cost-incomplete",), {"cost": "incomplete"}),
    # of the agent and ISO week that breached (weekly_breaches), not of the whole window
    "weekly_budget_utilisation": (("--sort", "cost_usd:desc"),
                                  {"sort": "cost_usd", "order": "desc"}),
}


def runs_behind(threshold: Threshold) -> tuple[tuple[str, ...], dict[str, str]]:
    """The `report runs` options and the Runs page's search for the runs behind a threshold:
    a reconciliation rate above its maximum is the runs whose writes were read back, below its
    minimum the runs with uncertain writes."""
    if threshold.signal == "reconciliation_rate":
        which = "reconciled" if threshold.bound == "max" else "uncertain"
        return ("--writes", which), {"writes": which}
    # The cost signals (docs/metrics.md §11) have no search of their own yet: the window's runs.
    return _RUNS_BEHIND.get(threshold.signal, ((), {}))


@dataclass(frozen=True)
class Leads:
    """Where a breach leads: the command that lists its runs (its arguments after
    `budgetscope`, --db included) and the dashboard's Runs page when its address is known."""
    command: str
    link: str | None


@dataclass(frozen=True)
class AgentWeek:
    """An agent's runs that started in one ISO week and in the window: whose weekly budget
    utilisation (docs/metrics.md §11.8) is measured over them."""
    agent: str
    since: dt.datetime
    until: dt.datetime


def weekly_breaches(con: Connection, window: Filters, limit: float) -> list[AgentWeek]:
    """The agent-weeks of the window whose weekly budget utilisation is above `limit`, the
    largest first (the signal's own, ties as the headline breaks them: the later week, then
    the agent later by name): the weekly report's rows over the window, which counts a week
    the window cuts short over the window's runs only, as the signal does."""
    rows = weekly(con, window)
    found = []
    for _, row in rows.iterrows():
        value = row["weekly_budget_utilisation"]
        if value is None or value != value or float(value) <= limit:
            continue
        monday = dt.datetime.combine(dt.date.fromisocalendar(
            *(int(part) for part in str(row["week"]).split("-W")), 1), dt.time(), dt.UTC)
        found.append((float(value), str(row["week"]), str(row["agent"]), AgentWeek(
            str(row["agent"]), max(monday, window.since),
            min(monday + dt.timedelta(weeks=1), window.until))))
    found.sort(key=lambda item: item[:3], reverse=True)
    return [item[3] for item in found]


def leads_of(context: click.Context, signals: Signals, threshold: Threshold,
             dashboard: str | None, breaches: list[AgentWeek] | None = None) -> list[Leads]:
    """The commands (and Runs page searches) listing the runs behind a threshold: the
    window's, or for a weekly budget breach each agent-week that breached, its runs only."""
    w = signals.window
    options, search = runs_behind(threshold)
    scopes = ([(b.since, b.until, b.agent) for b in breaches] if breaches
              else [(w.since, w.until, w.agent)])
    leads = []
    for start, end, agent in scopes:
        since, until = _bound(start), _bound(end)
        command = links.command(context, "report", "runs", *options, "--since", since,
                                "--until", until, *(("--agent", agent) if agent else ()),
                                "--format", "table")
        link = None
        if dashboard:
            filters = FilterState("custom", since, until, agent).query_params()
            link = links.page_url(dashboard, "runs", {**filters, **search})
        leads.append(Leads(command, link))
    return leads


@dataclass(frozen=True)
class Verdict:
    threshold: Threshold
    value: float | None

    @property
    def breached(self) -> bool:
        if self.value is None:
            return False  # no data: a rate over nothing neither breaches nor passes loudly
        if self.threshold.bound == "max":
            return self.value > self.threshold.limit
        return self.value < self.threshold.limit

    @property
    def state(self) -> str:
        return "breach" if self.breached else ("no data" if self.value is None else "ok")


def evaluate(signals: Signals, thresholds: list[Threshold]) -> list[Verdict]:
    return [Verdict(t, signals.value(t.signal)) for t in thresholds]


def _rate(option: str) -> click.Option:
    return click.option(f"--{option.replace('_', '-')}", option, type=click.FloatRange(0, 1),
                        help=f"Breach when {_THRESHOLDS[option][0]} is "
                             f"{'above' if _THRESHOLDS[option][1] == 'max' else 'below'} this "
                             "fraction.")


@click.command("check")
@click.option("--window", default="7d", show_default=True, type=Duration(),
              help="Runs that started in this long before --until: 90s, 30m, 1h, 7d, 2w.")
@click.option("--until", help="End of the window (exclusive), ISO date or datetime, UTC; "
              "default now.")
@click.option("--agent", help="Only this agent (gen_ai.agent.name, else service.name).")
@_rate("max_exhaustion_rate")
@_rate("max_reconciliation_rate")
@_rate("min_reconciliation_rate")
@_rate("max_client_timeout_rate")
@_rate("max_upstream_error_rate")
@click.option("--max-orphan-writes", "max_orphan_writes", type=click.IntRange(0),
              help="Breach when more uncertain writes than this were never read back.")
@click.option("--min-runs", "min_runs", type=click.IntRange(0),
              help="Breach when fewer runs than this started in the window (traces stopped "
                   "arriving).")
@_rate("max_usd_exhaustion_rate")
@_rate("max_token_exhaustion_rate")
@click.option("--max-weekly-budget-utilisation", "max_weekly_budget_utilisation",
              type=click.FloatRange(0),
              help="Breach when an agent's spend in an ISO week, over the window's runs, is "
                   "above this fraction of its declared weekly dollar budget (budgets set "
                   "--usd-per-week); 1.5 is one and a half times the budget.")
@click.option("--max-unpriced-steps", "max_unpriced_steps", type=click.IntRange(0),
              help="Breach when more top-level steps than this made a call with no known "
                   "price (their runs' cost is a lower bound; `budgetscope prices check` "
                   "lists the models).")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]),
              default="text", show_default=True,
              help="text (the window, then one line per threshold) or json (the window, the "
                   "signals and each threshold's state, one object).")
@dashboard_url_option
@click.pass_context
def check_command(context: click.Context, window: dt.timedelta, until: str | None,
                  agent: str | None, output_format: str, dashboard_url: str | None,
                  **limits: float | None) -> None:
    """Compare exhaustion, reconciliation, client give-up and upstream failure rates and orphan
    writes, and the dollar and token exhaustion rates, weekly budget utilisation and unpriced
    steps, over a recent window with thresholds; exit 1 on a breach, 2 on an error.

    Rates follow docs/metrics.md §3–§7 and §11 (e.g. reconciliation rate = reconciled writes /
    write steps; dollar exhaustion rate = dollar-exhausted runs / runs with a dollar budget).
    A rate with nothing to divide by (no runs, no writes) is reported as "no data" and is not
    a breach; use --min-runs to catch a window with no traffic.
    """
    thresholds = [Threshold(signal, bound, float(limits[option]), of)
                  for option, (signal, bound, of) in _THRESHOLDS.items()
                  if limits.get(option) is not None]
    if not thresholds:
        raise click.UsageError("give at least one threshold, e.g. --max-exhaustion-rate 0.05")
    try:
        end = parse_instant(until, "--until") if until else dt.datetime.now(dt.UTC)
    except FilterError as error:
        raise click.UsageError(str(error)) from None
    if (served_reader(context) is None and backend_option(context) is None
            and not Path(db_option(context)).exists()):
        raise CheckError(no_database(db_option(context)))
    span = Filters.ending(end, window, agent)
    try:
        with open_reader(context) as con:  # the DuckDB file, or the ClickHouse backend
            require_known_agent(con, agent)
            signals = recent_signals(con, span)
            verdicts = evaluate(signals, thresholds)
            breaches = {id(v): weekly_breaches(con, span, v.threshold.limit)
                        for v in verdicts
                        if v.breached and v.threshold.signal == "weekly_budget_utilisation"}
    except Fail as error:
        raise CheckError(error.message) from None
    except Exception as error:  # noqa: BLE001 - any failure to check is "could not check"
        # Never a traceback with exit 1, which cron reads as a breach.
        raise CheckError(f"could not check: {type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else ''}") from None
    dashboard = links.dashboard_url(context, dashboard_url)
    leads = {id(v): leads_of(context, signals, v.threshold, dashboard, breaches.get(id(v)))
             for v in verdicts}
    if output_format == "json":
        click.echo(json.dumps(_as_json(signals, verdicts, window, leads), indent=2),
                   file=output_stream(context))
    else:
        # The agent's name is the only text here a span may have set (through --agent).
        click.echo(terminal_safe(_as_text(signals, verdicts, window, leads),
                                 keep_newlines=True), file=output_stream(context))
    if any(v.breached for v in verdicts):
        context.exit(1)


def _window_line(signals: Signals, length: dt.timedelta) -> str:
    w = signals.window
    agent = f", agent {w.agent}" if w.agent else ""
    return (f"window {_iso(w.since)} to {_iso(w.until)} ({window_label(length)}{agent}): "
            f"{plural(signals.runs, 'run')}, {plural(signals.steps, 'step')}, "
            f"{plural(signals.write_steps, 'write step')}")


def _as_text(signals: Signals, verdicts: list[Verdict], length: dt.timedelta,
             leads: dict[int, list[Leads]]) -> str:
    lines = [_window_line(signals, length)]
    for verdict in verdicts:
        t = verdict.threshold
        # a rate reads as a percentage, as every table shows one
        rate = t.of is not None or t.signal in _PERCENT_SIGNALS
        shown = "no data" if verdict.value is None else _number(verdict.value, rate)
        relation = (">" if t.bound == "max" else "<") if verdict.breached else (
            "<=" if t.bound == "max" else ">=")
        detail = ""
        if t.of is not None:
            numerator, denominator = (int(signals.value(name) or 0) for name in t.of)
            detail = f" ({numerator} of {denominator} {t.of[1].replace('_', ' ')})"
        detail += _weekly_detail(signals, t)
        if verdict.value is None:
            lines.append(f"{'NO DATA':<8}{t.signal}: {t.bound} {_number(t.limit, rate)}"
                         f"{detail}")
        else:
            label = "BREACH" if verdict.breached else "ok"
            lines.append(f"{label:<8}{t.signal} {shown} {relation} {t.bound} "
                         f"{_number(t.limit, rate)}{detail}")
            if verdict.breached:
                # What on-call runs next: the runs behind the breach, in a terminal and on
                # the dashboard (a link only when its address is known); for a weekly
                # budget, those of each agent-week that breached.
                for lead in leads[id(verdict)]:
                    lines.append(f"{'':<8}runs: {lead.command}")
                    if lead.link:
                        lines.append(f"{'':<8}open: {lead.link}")
    breaches = sum(v.breached for v in verdicts)
    lines.append(_closing_line(breaches, len(verdicts)))
    return "\n".join(lines)


def _weekly_detail(signals: Signals, threshold: Threshold) -> str:
    """Whose week the weekly budget utilisation is (docs/metrics.md §11.8): the agent and ISO
    week with the largest share of its weekly dollar budget spent."""
    if threshold.signal != "weekly_budget_utilisation" or signals.weekly_budget_week is None:
        return ""
    agent = signals.weekly_budget_agent or "(no agent)"
    return f" ({agent}, {signals.weekly_budget_week})"


def _closing_line(breaches: int, total: int) -> str:
    noun = "threshold" if total == 1 else "thresholds"
    if breaches:
        return f"{breaches} of {total} {noun} breached"
    return "the threshold holds" if total == 1 else f"all {total} thresholds hold"


def _as_json(signals: Signals, verdicts: list[Verdict], length: dt.timedelta,
             leads: dict[int, list[Leads]]) -> dict:
    w = signals.window
    return {
        "window": {"since": _iso(w.since), "until": _iso(w.until), "length": window_label(length),
                   "agent": w.agent},
        "signals": {name: getattr(signals, name) for name in signals.__dataclass_fields__
                    if name != "window"},
        "checks": [{"signal": v.threshold.signal, "bound": v.threshold.bound,
                    "limit": v.threshold.limit, "value": v.value, "state": v.state,
                    # the first: the window's runs, or the worst agent-week's
                    "runs_command": leads[id(v)][0].command,
                    "runs_link": leads[id(v)][0].link,
                    "runs_commands": [{"command": lead.command, "link": lead.link}
                                      for lead in leads[id(v)]]}
                   for v in verdicts],
        "breached": any(v.breached for v in verdicts),
    }


def _bound(value: dt.datetime) -> str:
    """A window's bound as --since/--until and the dashboard's address take it: a date when
    it is midnight UTC, else the instant."""
    value = value.astimezone(dt.UTC)
    if value == value.replace(hour=0, minute=0, second=0, microsecond=0):
        return value.date().isoformat()
    return _iso(value)


def _iso(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _number(value: float, rate: bool = False) -> str:
    """A count as it is; a rate as a percentage with one decimal, as every table shows one
    (0.0833333 reads 8.3%), two significant digits below 0.1% (a limit of 0.0005 is 0.05%,
    not 0.0%). JSON keeps the fractions."""
    if not rate:
        return f"{value:.6g}"
    percent = value * 100
    return f"{percent:.1f}%" if percent == 0 or abs(percent) >= 0.1 else f"{percent:.2g}%"
