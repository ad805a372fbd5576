"""What every command shares: opening the database with errors a person can read."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click
import duckdb

from queries.loader import Connection
from queries.terminal import for_terminal, terminal_safe
from store import (
    CatchUp,
    DatabaseBusy,
    NoDatabase,
    SchemaError,
    Source,
    catch_up,
    clickhouse,
    connect,
)
from store import open_reader as open_reader_of


class Fail(click.ClickException):
    """A one-line error and exit status 1, never a traceback. The message may quote span data
    (an agent's name, a server's answer): it is made inert for a terminal."""

    exit_code = 1

    def format_message(self) -> str:
        return terminal_safe(self.message, keep_newlines=True)


def is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):  # no such method, or closed
        return False


def say_caught_up(caught: CatchUp) -> None:
    """What deriving at open (store.catch_up) could not do, on standard error: the
    command goes on with the runs derived so far."""
    if caught.error is not None:
        click.echo(f"warning: {caught.left_marked:,} trace(s) are not derived yet "
                   f"({caught.error}); runs and steps leave them out", err=True)
    if caught.traces_failed:
        click.echo(f"warning: {caught.traces_failed:,} trace(s) could not be derived "
                   "(recorded in the database status); their runs and steps stay as last "
                   "derived", err=True)


def catch_up_derivations(con: duckdb.DuckDBPyConnection) -> None:
    """Derive what a stopped or crashed writer left marked, so reports see every stored span
    (store.catch_up); what could not be derived is said on standard error."""
    say_caught_up(catch_up(con))


# How long a command that writes (`ingest`, `retain`, `demo`, `budgets`) waits for readers of
# a file nobody serves to let go: a dashboard's page run or a report holds it for a moment.
WRITER_WAIT_SECONDS = 10.0


@contextmanager
def open_database(path: str, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """The file opened for a command that writes it (derived up to date first), or read-only
    as it is (`read_only`)."""
    try:
        con = connect(path, read_only=read_only,
                      wait_seconds=0.0 if read_only else WRITER_WAIT_SECONDS)
        if not read_only:
            catch_up_derivations(con)
    except (DatabaseBusy, SchemaError) as error:
        raise Fail(str(error)) from None
    except duckdb.Error as error:
        raise Fail(f"cannot open database {path}: {error}") from None
    try:
        yield con
    finally:
        con.close()


def db_option(context: click.Context) -> str:
    return context.obj["db"]


def backend_option(context: click.Context) -> str | None:
    """The --backend URL (env BUDGETSCOPE_BACKEND), or None for the DuckDB file of --db."""
    return context.obj.get("backend") or None


def served_reader(context: click.Context) -> Connection | None:
    """The connection `budgetscope serve` hands a command it runs for a client (its read API,
    budgetscope/commands/served_cli.py), else None: the command opens what --db names."""
    return context.find_root().obj.get("reader")


def output_stream(context: click.Context) -> IO[str] | None:
    """Where a command's standard output goes: the client's answer when serve runs it for a
    client, else None (click's standard output)."""
    return context.find_root().obj.get("stdout")


def error_stream(context: click.Context) -> IO[str] | None:
    """Where a command's notes and warnings go: as output_stream, for standard error."""
    return context.find_root().obj.get("stderr")


def check_answer_rows(context: click.Context, rows: int, what: str) -> None:
    """Refuse an answer of more rows than the server's read API sends for one command
    (budgetscope/commands/served_cli.py); no bound on the file."""
    limit = context.find_root().obj.get("answer_rows")
    if limit is not None and rows > limit:
        raise Fail(f"{what} would answer {rows:,} rows; the server's read API answers at most "
                   f"{limit:,} for one command: narrow it with --limit N, --since/--until or "
                   "--agent")


def source(context: click.Context) -> Source:
    """Where --db and --backend say the data is."""
    return Source(db=db_option(context), backend=backend_option(context))


@contextmanager
def open_reader(context: click.Context) -> Iterator[Connection]:
    """What `report`, `run` and `check` read: the server's own reader when `serve` runs the
    command for a client; else store.open_reader's (the ClickHouse backend when --backend names
    one, its derived tables brought up to date first; else the DuckDB file of --db, what a
    stopped writer left marked derived first)."""
    served = served_reader(context)
    if served is not None:
        yield served
        return
    where = source(context)
    try:
        opened = open_reader_of(where, caught_up=say_caught_up)
    except NoDatabase:
        raise Fail(f"no database at {where.db}; load traces first with `budgetscope ingest`"
                   ) from None
    except (DatabaseBusy, SchemaError, clickhouse.BackendError, clickhouse.NoTraces) as error:
        raise Fail(str(error)) from None
    except duckdb.Error as error:
        if where.backend is not None:
            raise Fail(f"cannot read backend {where.backend}: {str(error).splitlines()[0]}"
                       ) from None
        raise Fail(f"cannot open database {where.db}: {error}") from None
    except Exception as error:  # the engine's own errors: connection refused, bad credentials
        if where.backend is None:
            raise
        raise Fail(f"cannot read backend {where.backend}: {str(error).splitlines()[0]}"
                   ) from None
    try:
        yield opened.connection
    finally:
        opened.close()


def write_output(data: bytes, out: Path | None, context: click.Context | None = None) -> None:
    """A report's bytes to `--out` FILE, or to standard output: exactly these bytes to a file or
    a pipe (`> runs.csv` keeps the data), made inert (queries.terminal.for_terminal) when
    standard output is a terminal, where a span's name could retitle the window or clear it."""
    if out is None:
        stream = None if context is None else output_stream(context)
        if is_terminal(sys.stdout if stream is None else stream):
            data = for_terminal(data)
        click.echo(data, nl=False, file=stream)
        return
    try:
        out.write_bytes(data)
    except OSError as error:
        raise Fail(f"cannot write {out}: {error.strerror or error}") from None


def window_label(length: dt.timedelta) -> str:
    """A window's length as the CLI and /metrics name it: `7d`, `24h`, `90m`, `45s`."""
    seconds = int(length.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
