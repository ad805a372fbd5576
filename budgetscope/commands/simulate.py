"""`budgetscope simulate`: replay the stored runs under another timeout policy and print what
would have happened beside what did."""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from budgetscope.commands.common import (
    open_reader,
    require_known_agent,
    terminal_width,
    width_option,
    write_output,
)
from budgetscope.fail import Fail
from queries import readable
from queries.filters import FilterError, Filters
from queries.render import to_csv_bytes, to_json_text, to_text_table
from simulation.data import simulation_runs, simulation_steps
from simulation.policy import PolicyError, SimulationPolicy
from simulation.replay import SimulationResult, check_caps, prepare, replay

VIEWS = ("summary", "tools", "fits")
# The tools table in a terminal: predicted beside actual and the arithmetic (CSV/JSON have all).
TABLE_TOOL_COLUMNS = ["step_key", "cap_ms", "calls_actual", "timeout_rate_actual", "calls",
                      "timeout_rate", "refused_actual", "refused", "calls_per_run",
                      "run_timeout_rate_formula", "run_timeout_rate", "fit_calls"]


def _view(result: SimulationResult, view: str) -> pd.DataFrame:
    return {"summary": result.summary, "tools": result.tools, "fits": result.fits}[view]


# Summary rows whose actual and predicted figures are fractions (shown as percentages).
_RATE_METRICS = ("rate", "utilisation")


def _readable_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary as people read it, as the What if page shows it: rates and utilisations
    as percentages, counts as counts (the rows mix both, so each is written here)."""
    rates = summary["metric"].str.contains("|".join(_RATE_METRICS))
    shown = summary.copy()
    for column in ("actual", "predicted"):
        shown[column] = [readable.percent(v) if rate else readable.count(v)
                         for v, rate in zip(summary[column], rates, strict=True)]
    shown["fit_share"] = summary["fit_share"].map(readable.percent)
    return shown


def _table(result: SimulationResult, view: str | None, width: int) -> str:
    """The text form: the policy, then each table with a line on what rests on the fit.
    Percentages and durations as every other table writes them; CSV and JSON keep the
    fractions."""
    parts = [f"policy: {result.policy.describe()}\n"]
    for name in (view,) if view else ("summary", "tools"):
        frame = _view(result, name)
        if name == "summary":
            table = to_text_table(_readable_summary(frame),
                                  right=frozenset({"actual", "predicted", "fit_share"}),
                                  width=width)
        else:
            if name == "tools":
                frame = frame[TABLE_TOOL_COLUMNS]
            formats = {**readable.table_formats(frame.columns),
                       "run_timeout_rate_formula": readable.percent,
                       "timeout_rate_actual": readable.percent,
                       "calls_per_run": lambda v: readable.NO_VALUE if readable.missing(v)
                       else f"{float(v):.2f}",
                       "sigma": lambda v: readable.NO_VALUE if readable.missing(v)
                       else f"{float(v):.3f}"}
            table = to_text_table(frame, {k: f for k, f in formats.items()
                                          if k in frame.columns},
                                  headers=readable.table_headers(frame.columns), width=width)
        parts.append(f"\n{name}\n{table}")
    tools = result.tools
    fitted = tools.loc[tools["rests_on_fit"], "step_key"].tolist()
    parts.append("\nfit_share / fit_calls: the part of a figure that rests on the latency model "
                 "(a log-normal per step fitted by maximum likelihood on completed and "
                 "timed-out calls, the latter right-censored at their cut)"
                 + (f"; here: {', '.join(fitted)}" if fitted else "; here: none, the replay "
                    "is exact") + ".\n")
    parts.append("run_timeout_rate_formula = 1 - (1 - timeout_rate)^calls_per_run, as if calls "
                 "were independent; run_timeout_rate is the replayed share of runs with a "
                 "timeout of that step.\n")
    return "".join(parts)


@click.command("simulate")
@click.option("--cap", "caps", multiple=True, metavar="NAME=DURATION",
              help="A step's cap under the policy, e.g. fetch_report=9s or tool:fetch_report="
                   "9000ms; `none` for no cap. Repeatable. Unset steps keep their recorded cap.")
@click.option("--deadline", metavar="DURATION",
              help="Every budgeted run's budget, e.g. 18s (default: each run's own).")
@click.option("--min-start", metavar="DURATION",
              help="Refuse a call instead of starting it when the budget left beyond the run's "
                   "reserve is below this, e.g. 1s (runs that report budget.remaining_ms only; "
                   "default: refusals as recorded).")
@click.option("--retries/--no-retries", default=True, show_default=True,
              help="Retry calls that time out at their cap (up to 3 attempts), or drop the "
                   "recorded retries and backoffs.")
@click.option("--since", help="Runs that started at or after this UTC instant (inclusive).")
@click.option("--until", help="Runs that started before this UTC instant (exclusive).")
@click.option("--agent", help="Only this agent (gen_ai.agent.name, else service.name).")
@click.option("--view", type=click.Choice(VIEWS), default=None,
              help="Which table: summary (default for csv/json), tools (per step key) or fits "
                   "(the latency model); table format shows summary and tools by default.")
@click.option("--format", "output_format", type=click.Choice(["csv", "json", "table"]),
              default="csv", show_default=True,
              help="csv, json (a list of objects) or table (aligned text for a terminal).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output.")
@width_option("--format table: characters a line may take; columns that do not fit are left "
              "out and named below each table.")
@click.pass_context
def simulate_command(context: click.Context, caps: tuple[str, ...], deadline: str | None,
                     min_start: str | None, retries: bool, since: str | None,
                     until: str | None, agent: str | None, view: str | None,
                     output_format: str, out: Path | None, width: int | None) -> None:
    """Replay the stored runs under another timeout policy: predicted client timeouts per step,
    refusals, exhaustion, utilisation and writes that would time out, beside what happened.

    Caps at or below a call's recorded cut replay exactly; above it, the call's latency comes
    from a log-normal fitted per step on completed and censored calls (fit_share says how much
    of each figure rests on it). Filters as for `report`.
    """
    try:
        filters = Filters.parse(since, until, agent)
        policy = SimulationPolicy.parse(caps, deadline, min_start, retries)
    except (FilterError, PolicyError) as error:
        # A usage error like any other command's (exit 2), not a failed simulation (1).
        raise click.UsageError(str(error)) from None
    with open_reader(context) as con:  # the DuckDB file, or the ClickHouse backend
        require_known_agent(con, agent)
        runs, steps = simulation_runs(con, filters), simulation_steps(con, filters)
    if runs.empty:
        raise Fail("no runs match the filters; nothing to simulate")
    prepared = prepare(runs, steps)
    try:
        check_caps(prepared, policy)
    except PolicyError as error:
        raise click.UsageError(str(error)) from None
    result = replay(prepared, policy)
    if output_format == "table":
        data = _table(result, view, width or terminal_width()).encode("utf-8")
    elif output_format == "json":
        data = to_json_text(_view(result, view or "summary")).encode("utf-8")
    else:
        data = to_csv_bytes(_view(result, view or "summary"))
    write_output(data, out, context)
