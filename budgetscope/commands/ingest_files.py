"""`budgetscope ingest PATH…`: load OTLP trace files."""

from __future__ import annotations

import click
import duckdb

from budgetscope.commands.common import Fail, open_database
from ingest.file_loader import load_files
from queries.derive import refresh_touched


@click.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--progress/--no-progress", default=None,
              help="Force the progress bar on or off (default: on a terminal, for slow loads).")
@click.option("--memory-limit", default="128MB", show_default=True,
              help="DuckDB's own memory (cache, indexes) for this load; decoding adds ~250 MB.")
@click.pass_context
def ingest_command(context: click.Context, paths: tuple[str, ...], progress: bool | None,
                   memory_limit: str) -> None:
    """Load OTLP trace files: OTLP JSON, JSON lines (the Collector's file exporter), binary
    protobuf or the Collector's length-prefixed protobuf stream, each optionally gzipped;
    folders are walked. Spans already stored are not stored twice. Exits 1 if anything was
    rejected."""
    db = context.obj["db"]
    with open_database(db) as con:
        # DuckDB otherwise keeps every block it wrote cached, up to 80% of the machine's RAM:
        # a 1M-span load peaked at 698-844 MB RSS without a limit; with 20k-span transactions
        # and 128-160 MB here, 491-498 MB, and no slower (bench/out/traces-1000000.pb-stream).
        try:
            con.execute("SET memory_limit = ?", [memory_limit])
        except duckdb.Error as error:
            raise Fail(f"--memory-limit {memory_limit!r}: {error}") from None
        summary = load_files(con, paths, progress=progress,
                             derive=refresh_touched)
    for line in summary.lines():
        click.echo(line, err=bool(summary.rejections) and line.startswith(" "))
    if summary.rejections:
        raise Fail(f"some input was rejected; everything else is stored in {db}")
