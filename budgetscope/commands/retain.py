"""`budgetscope retain --days N`: retention on a database file nobody serves (what
`serve --retention-days N` does in the background), e.g. from cron."""

from __future__ import annotations

from pathlib import Path

import click

from budgetscope.commands.common import db_option, no_database, open_database
from budgetscope.fail import Fail
from queries.words import plural
from store import retain


@click.command("retain")
@click.option("--days", type=click.FloatRange(0, min_open=True), required=True,
              help="Remove traces whose newest span ended more than this many days ago.")
@click.pass_context
def retain_command(context: click.Context, days: float) -> None:
    """Remove traces older than --days, whole (every span, derived run and step, and the
    resources and scopes nothing uses any more), then checkpoint so that new data reuses the
    space. Prints what was removed and the file size before and after."""
    db = db_option(context)
    if not Path(db).exists():
        raise Fail(no_database(db, "nothing to remove"))
    with open_database(db) as con:
        result = retain(con, days, db)
    click.echo(f"removed {plural(result.traces, 'trace')} ({plural(result.spans, 'span')}, "
               f"{result.resources:,} resources, {result.scopes:,} scopes) whose newest span "
               f"ended more than {days:g} days ago, in {result.seconds:.2f} s")
    click.echo(f"{db}: {result.file_bytes_before:,} bytes before, {result.file_bytes_after:,} "
               "after (DuckDB reuses the freed blocks for new data; the file itself rarely "
               "shrinks)")
    if result.checkpoint_error:
        click.echo(f"checkpoint postponed: {result.checkpoint_error}", err=True)
