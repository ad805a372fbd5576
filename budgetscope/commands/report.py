"""`budgetscope report NAME`: one docs/metrics.md §7/§8 report as CSV, JSON or a text table."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import click
import pandas as pd

from budgetscope.commands.common import (
    check_answer_rows,
    open_reader,
    require_known_agent,
    require_known_step_keys,
    terminal_width,
    width_option,
    write_chunks,
    write_output,
)
from queries import readable
from queries.filters import FilterError, Filters
from queries.loader import Connection, TooManyRows
from queries.render import csv_chunks, json_chunks, to_csv_bytes, to_json_text, to_text_table
from queries.reports import (
    DIMENSIONS,
    REPORTS,
    TOKENS,
    USD,
    Report,
    attribution_summary,
    cost_attribution_summary,
    report_pieces,
    token_attribution,
)
from queries.run_search import (
    NOT_STATED,
    SORTABLE,
    WRITES,
    RunSearch,
    SearchError,
    run_ids,
    search_runs,
    shortest_unique_starts,
)
from queries.run_story import step_name
from store import vocabulary

# The runs table in a terminal: what on-call picks a run by first, while the width allows.
OUTCOMES = (*vocabulary.RUN_OUTCOMES, NOT_STATED)
# Cost (docs/metrics.md §11.4) comes before the columns on-call reads less (holder, overrun…).
RUNS_TABLE_PRIORITY = ("run_id", "agent", "utilisation", "culprit", "culprit_share", "outcome",
                       "exhausted", "start", "elapsed_ms", "budget_ms", "cost_usd",
                       "cost_complete", "tokens", "holder", "overrun_ms", "unattributed_ms",
                       "budget_source", "root_missing")


@click.command("report")
@click.argument("name", metavar="NAME")
@click.option("--since", help="Runs that started at or after this UTC instant (inclusive): an "
              "ISO date (midnight UTC) or datetime; no offset means UTC.")
@click.option("--until", help="Runs that started before this UTC instant (exclusive), same "
              "forms as --since.")
@click.option("--agent", help="Only this agent (gen_ai.agent.name, else service.name).")
@click.option("--format", "output_format", type=click.Choice(["csv", "json", "table"]),
              default="csv", show_default=True,
              help="csv (the columns of docs/metrics.md §7–§8), json (a list of objects) or "
                   "table (aligned text for a terminal).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output.")
@click.option("--outcome", "outcomes", multiple=True, metavar="OUTCOME",
              type=click.Choice(OUTCOMES, case_sensitive=False),
              help="runs only: this stated outcome (completed, partial, exhausted, failed, "
              "cancelled, or none for runs that state none); repeatable.")
@click.option("--exhausted/--not-exhausted", default=None,
              help="runs only: exhausted runs, or runs with a budget that were not.")
@click.option("--culprit", metavar="STEP_KEY", help="runs only: runs whose culprit is this "
              "step key (e.g. tool:fetch_report).")
@click.option("--holder", metavar="STEP_KEY", help="runs only: runs whose holder (the step "
              "that held the deadline) is this step key.")
@click.option("--step", "step_key", metavar="STEP_KEY", help="runs only: runs holding a step "
              "of this key, nested steps included.")
@click.option("--step-class", type=click.Choice(vocabulary.CLASSES), metavar="CLASS",
              help="runs only: runs holding a step of this class (client_timeout, "
              "upstream_error, refused, …), nested steps included.")
@click.option("--writes", type=click.Choice(WRITES), help="runs only: runs holding an "
              "uncertain write, a write read back (reconciled), or an orphan write.")
@click.option("--usd-exhausted/--not-usd-exhausted", default=None,
              help="runs only: runs that spent (or were stopped at) their dollar budget, or "
              "runs budgeted in dollars that did not (docs/metrics.md §11.5).")
@click.option("--tokens-exhausted/--not-tokens-exhausted", default=None,
              help="runs only: the same for the token budget.")
@click.option("--cost-incomplete/--cost-complete", "cost_incomplete", default=None,
              help="runs only: runs whose cost is a lower bound (a call with no price, or a "
              "model step with no usage that may have been billed), or runs whose is not.")
@click.option("--cost-from", metavar="USD", help="runs only: runs whose known cost is at "
              "least this many dollars.")
@click.option("--cost-below", metavar="USD", help="runs only: runs whose known cost is below "
              "this many dollars.")
@click.option("--sort", metavar="COLUMN[:asc|desc]",
              help=f"runs only: order by one of {', '.join(SORTABLE)} (default: start, newest "
              "first in --format table, oldest first otherwise).")
@click.option("--limit", type=click.IntRange(min=1), help="runs only: at most this many runs.")
@width_option("--format table: characters a line may take; columns that do not fit are left "
              "out and named below the table.")
@click.option("--dimension", type=click.Choice(DIMENSIONS),
              help="cost-attribution only: the budget attributed over the runs that exhausted "
                   "it, usd (the dollar budget, the default) or tokens.")
@click.pass_context
def report_command(context: click.Context, name: str, since: str | None, until: str | None,
                   agent: str | None, output_format: str, out: Path | None,
                   outcomes: tuple[str, ...], exhausted: bool | None, culprit: str | None,
                   holder: str | None, step_key: str | None, step_class: str | None,
                   writes: str | None, usd_exhausted: bool | None,
                   tokens_exhausted: bool | None, cost_incomplete: bool | None,
                   cost_from: str | None, cost_below: str | None, sort: str | None,
                   limit: int | None, width: int | None, dimension: str | None) -> None:
    """Print report NAME: weekly, runs, attribution, failures, utilisation, reconciliation,
    cost, cost-attribution or models.

    Filters apply to runs by their start time: --since is inclusive, --until exclusive, both
    in UTC; a step, write or failure counts with the run it belongs to. CSV cells: empty when
    undefined, true/false, 3 decimals for *_ms columns and 6 for other fractions, dollars
    with up to 9 decimals (trailing zeros trimmed).
    """
    report = _cost_report(name, dimension) or REPORTS.get(name)
    if report is None:
        # A usage error like any other (exit 2), not a failure of the report.
        raise click.UsageError(f"unknown report {name!r}; choose one of: {', '.join(REPORTS)}")
    try:
        filters = Filters.parse(since, until, agent)
    except FilterError as error:
        raise click.UsageError(str(error)) from None
    spend = _CostSearch(usd_exhausted, tokens_exhausted,
                        None if cost_incomplete is None else not cost_incomplete,
                        _dollars(cost_from, "--cost-from"), _dollars(cost_below, "--cost-below"))
    search = _run_search(name, output_format, outcomes, exhausted, culprit, holder, step_key,
                         step_class, writes, sort, limit, spend)
    with open_reader(context) as con:
        require_known_agent(con, agent)
        require_known_step_keys(con, culprit=culprit, holder=holder, step=step_key)
        if search is None and output_format in ("csv", "json"):
            # Written as the query hands its rows over: a reader of any size costs a few
            # thousand rows of memory, here and in a server's read API (the same bytes).
            chunks = csv_chunks if output_format == "csv" else json_chunks
            write_chunks(chunks(report_pieces(con, name, filters, dimension=dimension or USD)),
                         out, context)
            return
        frame = (report(con, filters) if search is None
                 else search_runs(con, filters, search).runs)
        footer = _footer(con, name, filters, dimension) if output_format == "table" else ""
        if output_format == "table":
            table = _table(con, name, frame, width or terminal_width())
    check_answer_rows(context, len(frame), f"report {name}")
    if output_format == "csv":
        data = to_csv_bytes(frame)
    elif output_format == "json":
        data = to_json_text(frame).encode("utf-8")
    else:
        data = (table + footer).encode("utf-8")
    write_output(data, out, context)


def _table(con: Connection, name: str, frame: pd.DataFrame, width: int) -> str:
    """A report as a terminal table of `width` characters, headed in the units shown. The runs
    table names each run by the shortest start of its id no other run shares (what `run` and
    the run view take) and its culprit and holder by their numbers, as the dashboard does. A
    cost that is a lower bound (docs/metrics.md §11.4: a run's cost_complete false, a week with
    an incomplete run) reads `≥ $0.052`, and so do the figures made from it."""
    headers = readable.table_headers(frame.columns)
    frame, formats, written = readable.written_with_lower_bounds(
        frame, readable.table_formats(frame.columns))
    if name != "runs":
        return to_text_table(frame, formats, written, headers=headers, width=width)
    ids = [str(r) for r in frame["run_id"]]
    try:
        starts = shortest_unique_starts(ids, run_ids(con))
    except TooManyRows:
        starts = ids  # more runs than serve's read API reads for one command: whole ids
    shown = frame.drop(columns=["culprit_step", "holder_step"], errors="ignore").assign(
        run_id=starts,
        start=frame["start"].map(readable.instant),
        culprit=[step_name(n, k) or readable.NO_VALUE
                 for n, k in zip(frame["culprit_step"], frame["culprit"], strict=True)],
        holder=[step_name(n, k) or readable.NO_VALUE
                for n, k in zip(frame["holder_step"], frame["holder"], strict=True)])
    return to_text_table(shown, formats, written, width=width, priority=RUNS_TABLE_PRIORITY,
                         headers={**headers, "run_id": "run", "start": "start (UTC)",
                                  "culprit_share": "culprit share"})


def _cost_report(name: str, dimension: str | None) -> Report | None:
    """`cost-attribution --dimension tokens` is the token_attribution report (the dashboard
    downloads it under that name); --dimension is refused for any other report."""
    if dimension is not None and name != "cost-attribution":
        raise click.UsageError("--dimension applies to the cost-attribution report only")
    return token_attribution if dimension == TOKENS else None


@dataclass(frozen=True)
class _CostSearch:
    """The runs report's narrowing by tokens and dollars (docs/metrics.md §11)."""

    usd_exhausted: bool | None = None
    tokens_exhausted: bool | None = None
    cost_complete: bool | None = None
    cost_min: Decimal | None = None
    cost_max: Decimal | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.usd_exhausted, self.tokens_exhausted,
                                           self.cost_complete, self.cost_min, self.cost_max))


def _dollars(text: str | None, option: str) -> Decimal | None:
    if text is None:
        return None
    try:
        value = Decimal(text.strip().lstrip("$"))
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite() or value < 0:
        raise click.UsageError(f"{option} {text!r} is not an amount of dollars (e.g. 0.50)")
    return value


def _run_search(name: str, output_format: str, outcomes: tuple[str, ...],
                exhausted: bool | None, culprit: str | None, holder: str | None,
                step_key: str | None, step_class: str | None, writes: str | None,
                sort: str | None, limit: int | None,
                spend: _CostSearch = _CostSearch()) -> RunSearch | None:
    """The `runs` report's narrowing options as a RunSearch; None when none applies (the
    report as it always was, oldest first), except that a table lists the newest first."""
    given = (bool(outcomes) or exhausted is not None or culprit or holder or step_key
             or step_class or writes or sort or limit or spend.given)
    if name != "runs":
        if given:
            raise click.UsageError("--outcome, --exhausted, --culprit, --holder, --step, "
                                   "--step-class, --writes, --usd-exhausted, "
                                   "--tokens-exhausted, --cost-incomplete, --cost-from, "
                                   "--cost-below, --sort and --limit apply to the runs report "
                                   "only")
        return None
    if not given and output_format != "table":
        return None
    column, _, order = (sort or "start").partition(":")
    if order not in ("", "asc", "desc"):
        raise click.UsageError(f"--sort {sort!r}: the order after ':' is asc or desc")
    descending = None if order == "" else order == "desc"
    if sort is None and output_format != "table":
        descending = False  # CSV and JSON keep the report's own order, oldest first
    try:
        return RunSearch(outcomes=outcomes, exhausted=exhausted, culprit=culprit,
                         holder=holder, step_key=step_key, step_class=step_class,
                         writes=writes, usd_exhausted=spend.usd_exhausted,
                         tokens_exhausted=spend.tokens_exhausted,
                         cost_complete=spend.cost_complete, cost_min=spend.cost_min,
                         cost_max=spend.cost_max, sort=column, descending=descending,
                         limit=limit)
    except SearchError as error:
        raise click.UsageError(f"--sort: {error}") from None


def _footer(con: object, name: str, filters: Filters, dimension: str | None = None) -> str:
    """The attribution table also says how often the culprit is not the holder (docs/metrics.md §4),
    and the cost attribution table how often the cost culprit is not the crosser (§11.6)."""
    if name == "cost-attribution":
        return _cost_footer(con, filters, dimension or "usd")
    if name != "attribution":
        return ""
    row = attribution_summary(con, filters).iloc[0]  # type: ignore[arg-type]
    rate = row["culprit_is_holder_rate"]
    if row["exhausted_runs"] == 0 or rate != rate:  # NaN: no run with culprit and holder
        return f"\n{int(row['exhausted_runs'])} exhausted runs\n"
    return (f"\n{int(row['exhausted_runs'])} exhausted runs; culprit is the holder in "
            f"{rate:.1%}, not the holder in {1 - rate:.1%}\n")


def _cost_footer(con: object, filters: Filters, dimension: str) -> str:
    """How often the cost culprit is the crosser, over the exhausted runs that have one: a run
    exhausted by a refusal, or whose crossing call lay under no step, has none (§11.6)."""
    row = cost_attribution_summary(con, filters, dimension).iloc[0]  # type: ignore[arg-type]
    word = "dollar" if dimension == "usd" else "token"
    runs = readable.plural(int(row["exhausted_runs"]), f"{word}-exhausted run")
    rate = row["culprit_is_crosser_rate"]
    if readable.missing(rate):  # no exhausted run had a crosser
        return f"\n{runs}; none has a crosser (a step whose call reached the budget)\n"
    return (f"\n{runs}; the culprit is the crosser in {rate:.1%}, not the crosser in "
            f"{1 - rate:.1%} (of the {int(row['crossed_runs'])} with a crosser)\n")
