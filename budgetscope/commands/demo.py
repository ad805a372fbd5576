"""`budgetscope demo`: the bundled sample traces in a fresh database, then the product on it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click
import pandas as pd

from budgetscope.commands.common import open_database
from budgetscope.commands.dashboard import alone_connections, serve_dashboard
from budgetscope.commands.ports import require_free
from budgetscope.config import DEMO_DB, SAMPLE_TRACES
from budgetscope.fail import Fail
from dashboard.filters import FilterState, start_of_week
from dashboard.server.bootstrap import DashboardServer
from ingest.files.loader import load_files
from queries import readable
from queries.render import to_text_table
from queries.reports import attribution, runs
from store import Change, apply, parse_usd_nano

DEMO_MARKER = "demo_database"
# Weekly dollar budgets the demo declares (the sample's traces cannot: a weekly budget is a
# team's declaration, docs/metrics.md §11.8), so that the Cost page's weekly spend has a line
# to be measured against on first open: research-agent spends about $8.5-11 a week, support-agent
# $2.2-2.9, so some weeks go over. They re-measure no run.
DEMO_WEEKLY_BUDGETS = {"research-agent": "10", "support-agent": "2.50"}


def _reset_demo_database(path: Path) -> None:
    """Start fresh, but never delete a database that was not made by `demo`."""
    if not path.exists():
        return
    with open_database(str(path)) as con:
        row = con.execute("SELECT value FROM budgetscope_meta WHERE key = ?",
                          [DEMO_MARKER]).fetchone()
    if row is None:
        raise Fail(f"{path} exists and was not made by `budgetscope demo`; "
                   "refusing to replace it (choose another --db)")
    path.unlink()
    Path(f"{path}.wal").unlink(missing_ok=True)


def _chosen_database(context: click.Context, demo_db: str) -> str:
    """`budgetscope --db X demo` means X, like every other command; the demo's own --db wins
    when both are given. BUDGETSCOPE_DB is not followed: it usually names the team's real file,
    which demo would refuse to replace."""
    parent = context.parent
    own = context.get_parameter_source("demo_db")
    if (parent is not None and own is not click.core.ParameterSource.COMMANDLINE
            and parent.get_parameter_source("db") is click.core.ParameterSource.COMMANDLINE):
        return str(parent.params["db"])
    return demo_db


def sample_weeks(starts: pd.Series) -> FilterState | None:
    """The sample's own time span in whole ISO weeks (Monday of its first run's week to the
    Monday after its last run's), so the dashboard opens on the runs the terminal has just
    summed up, not on "Last 7 days" of them, and no week of it reads as a partial one."""
    if starts.empty:
        return None
    first = pd.Timestamp(starts.min()).to_pydatetime()
    last = pd.Timestamp(starts.max()).to_pydatetime()
    since = start_of_week(first)
    until = start_of_week(last) + dt.timedelta(weeks=1)
    return FilterState("custom", since.date().isoformat(), until.date().isoformat())


@click.command("demo")
@click.option("--db", "demo_db", default=DEMO_DB, show_default=True,
              help="Database file for the demo (recreated each time).")
@click.option("--port", default=8501, show_default=True, type=click.IntRange(1, 65535),
              help="Dashboard port (on 127.0.0.1).")
@click.option("--no-ui", "--no-open", "no_ui", is_flag=True,
              help="Load and print only; do not start the dashboard (for scripts).")
@click.pass_context
def demo_command(context: click.Context, demo_db: str, port: int, no_ui: bool) -> None:
    """Load the bundled sample traces into a fresh database and show what they say."""
    path = Path(_chosen_database(context, demo_db))
    if not no_ui:
        # Before loading anything, not after printing a URL where another program answers.
        require_free("127.0.0.1", port, "the demo's dashboard",
                     "choose another with `budgetscope demo --port N` (or `make demo PORT=N`)")
    _reset_demo_database(path)
    with open_database(str(path)) as con:
        summary = load_files(con, [SAMPLE_TRACES], derive=True)
        con.execute("INSERT INTO budgetscope_meta VALUES (?, 'true')", [DEMO_MARKER])
        for agent, usd in DEMO_WEEKLY_BUDGETS.items():
            apply(con, Change("set", agent, usd_per_week_nano=parse_usd_nano(usd)))
        headline = attribution(con).head(8)
        opening = sample_weeks(runs(con)["start"])
    for line in summary.lines():
        click.echo(line)
    click.echo("Declared for the demo, weekly dollar budgets: " + ", ".join(
        f"{agent} ${usd}" for agent, usd in DEMO_WEEKLY_BUDGETS.items())
        + f" (`budgetscope --db {path} budgets list`).")
    click.echo("\nWho spent the budget of exhausted runs (top step keys; "
               f"`budgetscope --db {path} report attribution --format table` for all):")
    click.echo(to_text_table(headline, readable.table_formats(headline.columns)), nl=False)
    if not no_ui:
        click.echo("")
        serve_dashboard(str(path), DashboardServer("127.0.0.1", port,
                                                   connections=alone_connections()), opening)
