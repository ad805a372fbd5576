"""What every command shares: opening the database with errors a person can read."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click
import duckdb

from budgetscope.config import DEMO_DB
from budgetscope.fail import Fail, refuse_trace_file
from queries.terminal import for_terminal, terminal_safe
from store import CatchUp, DatabaseBusy, SchemaError, catch_up, connect

# What reads (queries/, the store's reader and its ClickHouse backend) imports pandas and
# pyarrow: imported by the functions that read, so that the commands that only write or declare
# start without them (issue 48; tests/cli/test_cli_start.py).
if TYPE_CHECKING:
    from queries.loader import Connection
    from store import Source


def is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):  # no such method, or closed
        return False


def no_database(db: str, doing: str = "") -> str:
    """"No database" with the fix: the demo's file when it is right here (the usual slip: the
    demo wrote budgetscope-demo.duckdb, the commands read budgetscope.duckdb), else how to make
    one. `doing`: what the command would have done, for a command that would have written."""
    head = f"no database at {db}" + (f"; {doing}" if doing else "")
    if Path(DEMO_DB).exists() and Path(db).resolve() != Path(DEMO_DB).resolve():
        return (f"{head}. The demo's database is here: give it before the command, "
                f"`budgetscope --db {DEMO_DB} …`")
    return (f"{head}. Load traces with `budgetscope --db {db} ingest PATH`, start "
            f"`budgetscope --db {db} serve`, or try `budgetscope demo` (it writes {DEMO_DB})")


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
    refuse_trace_file(path)
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
    budgetscope/server/read_api.py), else None: the command opens what --db names."""
    return context.find_root().obj.get("reader")


def output_stream(context: click.Context) -> IO[str] | None:
    """Where a command's standard output goes: the client's answer when serve runs it for a
    client, else None (click's standard output)."""
    return context.find_root().obj.get("stdout")


def check_answer_rows(context: click.Context, rows: int, what: str) -> None:
    """Refuse an answer of more rows than the server's read API sends for one command
    (budgetscope/server/read_api.py); no bound on the file."""
    limit = context.find_root().obj.get("answer_rows")
    if limit is not None and rows > limit:
        raise Fail(f"{what} would answer {rows:,} rows; the server's read API answers at most "
                   f"{limit:,} for one command: narrow it with --limit N, --since/--until or "
                   "--agent")


def source(context: click.Context) -> Source:
    """Where --db and --backend say the data is."""
    from store import Source

    return Source(db=db_option(context), backend=backend_option(context))


@contextmanager
def open_reader(context: click.Context) -> Iterator[Connection]:
    """What `report`, `run` and `check` read: the server's own reader when `serve` runs the
    command for a client; else store.open_reader's (the ClickHouse backend when --backend names
    one, its derived tables brought up to date first; else the DuckDB file of --db, what a
    stopped writer left marked derived first)."""
    from store import NoDatabase, clickhouse
    from store import open_reader as open_reader_of

    served = served_reader(context)
    if served is not None:
        yield served
        return
    where = source(context)
    if where.backend is None:
        refuse_trace_file(where.db)
    try:
        opened = open_reader_of(where, caught_up=say_caught_up)
    except NoDatabase:
        raise Fail(no_database(where.db)) from None
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
    except clickhouse.QueryFailed as error:  # one line naming the backend, not a traceback
        raise Fail(str(error)) from None
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


def write_chunks(chunks: Iterable[bytes], out: Path | None,
                 context: click.Context | None = None) -> None:
    """`write_output` for an answer made in pieces: each piece written as it comes, to `--out`
    FILE or to a file or pipe on standard output (the same bytes as the whole); gathered
    first for a terminal, whose sanitising reads the whole."""
    stream = None if context is None else output_stream(context)
    if out is None and is_terminal(sys.stdout if stream is None else stream):
        write_output(b"".join(chunks), None, context)
        return
    try:
        if out is not None:
            with out.open("wb") as file:
                for chunk in chunks:
                    file.write(chunk)
            return
    except OSError as error:
        raise Fail(f"cannot write {out}: {error.strerror or error}") from None
    for chunk in chunks:
        click.echo(chunk, nl=False, file=stream)


def require_known_agent(con: Connection, agent: str | None) -> None:
    """A misspelt --agent gave an empty report and exit 0: exit 2 naming the agents there
    are (all time, so an agent with no runs in the range is still known)."""
    if agent is None:
        return
    from queries.reports import runs_by_agent  # a query module the commands load anyway

    known = sorted(str(name) for name in runs_by_agent(con)["agent"].dropna())
    if agent not in known:
        # agent names come from spans: inert on the terminal
        listed = ", ".join(terminal_safe(name) for name in known) if known else "none yet"
        raise click.UsageError(f"--agent {terminal_safe(repr(agent))}: no such agent in this "
                               f"database; known agents: {listed}")


def require_known_step_keys(con: Connection, **given: str | None) -> None:
    """A misspelt --culprit or --holder gave an empty table and exit 0: exit 2 naming the
    step keys there are (all time). `given`: option name (without --) -> step key or None."""
    asked = {option: key for option, key in given.items() if key}
    if not asked:
        return
    from queries.run_search import step_keys  # a query module the commands load anyway

    known = step_keys(con)
    for option, key in asked.items():
        if key not in known:
            listed = ", ".join(terminal_safe(name) for name in known[:KNOWN_SHOWN])
            more = f" and {len(known) - KNOWN_SHOWN:,} more" if len(known) > KNOWN_SHOWN \
                else ""
            raise click.UsageError(
                f"--{option} {terminal_safe(repr(key))}: no step of that key in this "
                f"database; step keys are kind:name, e.g. tool:fetch_report; known: "
                f"{listed or 'none yet'}{more}")


# How many known names a usage error lists before "and N more".
KNOWN_SHOWN = 40
# A terminal table or a run's summary: at least this wide (a waterfall row needs the room).
MIN_WIDTH = 80
MAX_WIDTH = 400


def terminal_width() -> int:
    """The terminal's width (COLUMNS, else the terminal's own), at least MIN_WIDTH; MIN_WIDTH
    when the output is not a terminal."""
    return min(MAX_WIDTH, max(MIN_WIDTH, shutil.get_terminal_size((MIN_WIDTH, 24)).columns))


def width_option(help_text: str):  # type: ignore[no-untyped-def]
    """`--width N` (80 to 400; default the terminal's width), for the commands that print
    text for a terminal."""
    return click.option(
        "--width", default=None, type=click.IntRange(MIN_WIDTH, MAX_WIDTH),
        help=f"{help_text} Default: the terminal's width (at least {MIN_WIDTH}), "
             f"{MIN_WIDTH} when the output is not a terminal.")
