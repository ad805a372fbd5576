"""`budgetscope ingest PATH…`: load OTLP trace files."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import click
import duckdb

from budgetscope.commands.common import open_database
from budgetscope.durations import Duration
from budgetscope.fail import Fail
from budgetscope.log_format import configure_logging
from ingest.files.loader import LoadSummary, load_files
from queries.terminal import terminal_safe

_LOG = logging.getLogger("budgetscope.ingest")


@click.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--progress/--no-progress", default=None,
              help="Force the progress bar on or off (default: on a terminal, for slow loads).")
@click.option("--memory-limit", default="128MB", show_default=True,
              help="DuckDB's own memory (cache, indexes) for this load; decoding adds ~250 MB.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: also one JSON object per line on standard error, "
              "for each rejection reason and for the load's totals (the summary then goes to "
              "standard output whole).")
@click.option("--root-grace", type=Duration(zero=True), default="0", show_default=True,
              help="A trace whose root span has not arrived is measured from its earliest span "
              "once none of its spans has arrived for this long, decided once the files are "
              "read (0: at once; longer leaves newer ones to a later serve or ingest).")
@click.pass_context
def ingest_command(context: click.Context, paths: tuple[str, ...], progress: bool | None,
                   memory_limit: str, log_format: str, root_grace: dt.timedelta) -> None:
    """Load OTLP trace files: OTLP JSON, JSON lines (the Collector's file exporter), binary
    protobuf or the Collector's length-prefixed protobuf stream, each optionally gzipped;
    folders are walked. Logs exports (resourceLogs) in the same forms are loaded too. Spans
    and log records already stored are not stored twice. Exits 1 if anything was rejected."""
    db = context.obj["db"]
    missing = [path for path in paths if not Path(path).exists()]
    if missing:
        # A usage error (exit 2), said before any database is created.
        raise click.UsageError(f"no such file or folder: {', '.join(missing)}")
    created = not Path(db).exists()
    with open_database(db) as con:
        # DuckDB otherwise keeps every block it wrote cached, up to 80% of the machine's RAM:
        # a 1M-span load peaked at 698-844 MB RSS without a limit; with 20k-span transactions
        # and 128-160 MB here, 491-498 MB, and no slower (bench/out/traces-1000000.pb-stream).
        try:
            con.execute("SET memory_limit = ?", [memory_limit])
        except duckdb.Error as error:
            raise Fail(f"--memory-limit {memory_limit!r}: {error}") from None
        summary = load_files(con, paths, progress=progress, derive=True,
                             root_grace_seconds=root_grace.total_seconds())
    nothing = (summary.spans_loaded + summary.spans_present + summary.spans_rejected == 0
               and not summary.logs_seen)
    if nothing and not summary.rejections:
        if created:  # nothing loaded leaves no empty database behind
            _remove_database(db)
        raise Fail(f"nothing to load: no spans in {', '.join(paths)}")
    as_json = log_format == "json"
    for line in summary.lines():
        line = terminal_safe(line)  # rejection examples quote the input
        click.echo(line, err=not as_json and bool(summary.rejections) and line.startswith(" "))
    if as_json:
        _log_summary(db, summary)
        if summary.rejections:
            context.exit(1)  # said by the log lines: standard error stays JSON only
    if summary.rejections:
        raise Fail(f"some input was rejected; everything else is stored in {db}")


def _remove_database(db: str) -> None:
    for path in (Path(db), Path(f"{db}.wal")):
        path.unlink(missing_ok=True)


def _log_summary(db: str, summary: LoadSummary) -> None:
    configure_logging("json")
    for reason, count in sorted(summary.rejections.counts.items()):
        _LOG.warning("rejected [%s] ×%d", reason, count, extra={
            "event": "rejected", "reason": reason, "count": count,
            "spans": summary.rejections.spans[reason],
            "log_records": summary.rejections.log_records[reason],
            "examples": [str(example) for example in summary.rejections.examples[reason]]})
    _LOG.info("%d spans loaded into %s", summary.spans_loaded, db, extra={
        "event": "ingested", "db": db, "files": summary.files,
        "spans_loaded": summary.spans_loaded, "spans_present": summary.spans_present,
        "spans_rejected": summary.spans_rejected, "logs_loaded": summary.logs_loaded,
        "logs_present": summary.logs_present, "logs_rejected": summary.logs_rejected,
        "logs_without_span": summary.logs_without_span,
        "logs_span_missing": summary.logs_span_missing, "seconds": round(summary.seconds, 3),
        "derive_seconds": round(summary.derive_seconds, 3)})
