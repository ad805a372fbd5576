"""`budgetscope demo`: the bundled sample traces in a fresh database, then the product on it."""

from __future__ import annotations

from pathlib import Path

import click

from budgetscope.commands.common import Fail, open_database
from budgetscope.config import DEMO_DB, SAMPLE_TRACES
from ingest.file_loader import load_files

DEMO_MARKER = "demo_database"


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


@click.command("demo")
@click.option("--db", "demo_db", default=DEMO_DB, show_default=True,
              help="Database file for the demo (recreated each time).")
def demo_command(demo_db: str) -> None:
    """Load the bundled sample traces into a fresh database and show what they say."""
    path = Path(demo_db)
    _reset_demo_database(path)
    with open_database(str(path)) as con:
        summary = load_files(con, [SAMPLE_TRACES])
        con.execute("INSERT INTO budgetscope_meta VALUES (?, 'true')", [DEMO_MARKER])
    for line in summary.lines():
        click.echo(line)
