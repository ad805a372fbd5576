"""`budgetscope ingest PATH…`: load OTLP trace files."""

from __future__ import annotations

import click

from budgetscope.commands.common import Fail, open_database
from ingest.file_loader import load_files
from queries.derive import refresh_touched


@click.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--progress/--no-progress", default=None,
              help="Force the progress bar on or off (default: on a terminal, for slow loads).")
@click.pass_context
def ingest_command(context: click.Context, paths: tuple[str, ...], progress: bool | None) -> None:
    """Load OTLP trace files: OTLP JSON, JSON lines (the Collector's file exporter), binary
    protobuf or the Collector's length-prefixed protobuf stream, each optionally gzipped;
    folders are walked. Spans already stored are not stored twice. Exits 1 if anything was
    rejected."""
    db = context.obj["db"]
    with open_database(db) as con:
        summary = load_files(con, paths, progress=progress,
                             derive=refresh_touched)
    for line in summary.lines():
        click.echo(line, err=bool(summary.rejections) and line.startswith(" "))
    if summary.rejections:
        raise Fail(f"some input was rejected; everything else is stored in {db}")
