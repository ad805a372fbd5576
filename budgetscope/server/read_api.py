"""The read-only commands run inside `budgetscope serve` for a client (its read API, POST /cli:
budgetscope/server/cli_endpoint.py), so that `report`, `run`, `check` and `simulate` work while
the server holds the file, with the bytes and exit status the same command gives on the file.

The server runs the very command code, parsed by the same click group (handed in by serve,
which gets it from its own click context: this module never imports the CLI, which imports
serve), with two differences only: it reads through a cursor of the server's DatabaseOwner (as
the dashboard inside serve does) instead of opening a path, and its standard output and error
are handed to the answer as they are written. What a client sends is a list of arguments,
never code and never a path the server opens: the command must be on the allow-list, and
`--out` (a file written on the server) is refused; the client writes --out itself.

One call's memory is bounded whatever the file's size. A CSV or JSON report is written as the
query hands its rows over (queries.reports.report_pieces), and its answer streamed to the
client as it is written (budgetscope/server/cli_endpoint.py): the call holds a few thousand rows
and a few chunks. What a command builds whole before it prints (a table, `--limit` and the
other narrowing of `report runs`, `run`, `check`, `simulate`) is bounded by constants: each
query returns at most READ_ROWS rows (queries.loader.rows_at_most), a report answers at most
ANSWER_ROWS rows; past either the command is refused with a message saying how to narrow it.
Buffered whole, `report runs --format json` on 100k runs answered 52 MB and took serve from
216 to 596 MB of RSS (twelve at once: 963 MB); bench/bench_read_api_memory.py measures it
streamed.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import click
import duckdb

from queries.loader import TooManyRows, rows_at_most
from store import DatabaseOwner

ALLOWED_COMMANDS = ("report", "run", "check", "simulate")
# Options that would make the server touch its own file system, or read another database.
# Help is printed by the client itself (click would write it to the server's own stdout).
REFUSED_OPTIONS = ("--out", "--db", "--backend", "--server", "-h", "--help")
MAX_ARGUMENTS = 200
MAX_ARGUMENT_CHARS = 4096
# The bounds of a call that builds its answer whole (bench/bench_read_api_memory.py): on
# 100,800 runs `report runs --limit 20000` (8.9 MB) took +121 MB, twelve at once +205 MB; on
# 1,000,800 runs any narrowed `report runs` is refused after 200,000 rows read.
READ_ROWS = 200_000
ANSWER_ROWS = 20_000
_NARROW = "--since/--until or --agent"


class RefusedCommand(ValueError):
    """The arguments are not a read-only command the server runs for a client."""


@dataclass(frozen=True)
class CommandResult:
    status: int
    stdout: bytes
    stderr: bytes


def check_arguments(argv: object) -> list[str]:
    """`argv` as a list of strings naming an allowed command, else RefusedCommand."""
    if not isinstance(argv, list) or not all(isinstance(part, str) for part in argv):
        raise RefusedCommand("argv must be a list of strings")
    if not argv:
        raise RefusedCommand(f"argv names no command; one of: {', '.join(ALLOWED_COMMANDS)}")
    if len(argv) > MAX_ARGUMENTS or any(len(part) > MAX_ARGUMENT_CHARS for part in argv):
        raise RefusedCommand(f"at most {MAX_ARGUMENTS} arguments of {MAX_ARGUMENT_CHARS} "
                             "characters each")
    if argv[0] not in ALLOWED_COMMANDS:
        raise RefusedCommand(f"the server runs only {', '.join(ALLOWED_COMMANDS)} for a "
                             f"client, not {argv[0]!r}")
    for part in argv[1:]:
        option = part.split("=", 1)[0]
        if option in REFUSED_OPTIONS:
            raise RefusedCommand(f"{option} is not accepted by the server (the client writes "
                                 "--out itself; the server reads only the file it holds)")
        if "\0" in part:
            raise RefusedCommand("an argument contains a NUL character")
    return list(argv)


class _Sink(io.RawIOBase):
    """A command's standard output or error as bytes handed on as they are written."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        super().__init__()
        self._write = write

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._write(bytes(data))
        return len(data)


def _stream(write: Callable[[bytes], None]) -> io.TextIOWrapper:
    """A text stream over `write`, as a terminal's standard output: UTF-8, no newline
    translation, written through so that text and bytes written to it keep their order."""
    return io.TextIOWrapper(_Sink(write), encoding="utf-8", newline="",  # type: ignore[arg-type]
                            write_through=True)


class ServedCommands:
    """Runs allowed commands of `group` (the `budgetscope` click group) against the owner's
    data, each for at most `seconds`."""

    refused = RefusedCommand

    def __init__(self, owner: DatabaseOwner, *, group: click.Group, seconds: float,
                 read_rows: int = READ_ROWS, answer_rows: int = ANSWER_ROWS,
                 db: str | None = None, dashboard_url: str | None = None) -> None:
        """`db`: the file the server holds, which the commands an answer prints name;
        `dashboard_url`: the server's dashboard, which `check` and `run` link to."""
        self.owner = owner
        self.db, self.dashboard_url = db, dashboard_url
        self.group = group
        self.seconds = seconds
        self.read_rows, self.answer_rows = read_rows, answer_rows

    def check(self, argv: object) -> list[str]:
        return check_arguments(argv)

    def run(self, argv: Sequence[str]) -> CommandResult:
        """The command's whole output and status (the CLI's client gets them streamed)."""
        out, err = io.BytesIO(), io.BytesIO()
        status = self.stream(check_arguments(list(argv)), out.write, err.write)
        return CommandResult(status, out.getvalue(), err.getvalue())

    def stream(self, arguments: list[str], stdout: Callable[[bytes], None],
               stderr: Callable[[bytes], None]) -> int:
        """Run checked `arguments`, each write of the command handed to `stdout` or
        `stderr` as it happens; the exit status. An exception a write raises (the client
        gone) stops the command and is raised again."""
        out, err = _stream(stdout), _stream(stderr)
        cursor = self.owner.cursor()
        # DuckDB stops a running query on interrupt(): a call over its time ends with an error
        # instead of holding one of the few threads of the read API.
        timer = threading.Timer(self.seconds, cursor.interrupt)
        timer.daemon = True
        timer.start()
        # `check` says it could not check (2), never a breach (1).
        refused = 2 if arguments[0] == "check" else 1
        try:
            with rows_at_most(self.read_rows):
                return _invoke(self.group, arguments,
                               {"reader": cursor, "stdout": out, "stderr": err,
                                "answer_rows": self.answer_rows, "served_db": self.db,
                                "dashboard_url": self.dashboard_url}, err)
        except duckdb.InterruptException:
            return _refused(err, refused, f"the server stopped the command after "
                            f"{self.seconds:g} s (its limit for one call); narrow it with "
                            f"{_NARROW}")
        except TooManyRows as error:
            return _refused(err, refused, f"the server's read API reads at most "
                            f"{self.read_rows:,} rows for one command ({error.name} holds "
                            "more), so that one call cannot take the memory the server "
                            f"ingests with; narrow it with {_NARROW}, or write the report as "
                            "CSV or JSON without --limit and the other narrowing options "
                            "(streamed, with no such bound), or run it where nobody serves "
                            "the file (a copy)")
        finally:
            timer.cancel()
            cursor.close()


def _refused(err: io.TextIOWrapper, status: int, message: str) -> int:
    """A command the server stopped: why, on standard error."""
    err.write(f"Error: {message}\n")
    return status


def _invoke(cli: click.Group, arguments: list[str], obj: dict, err: io.TextIOWrapper) -> int:
    """The command's exit status, its errors written to `err` as click writes them to a
    terminal (`Error: …`, with the usage line for a usage error)."""
    try:
        result = cli.main(args=arguments, prog_name="budgetscope", standalone_mode=False,
                          obj=obj)
    except click.ClickException as error:
        error.show(file=err)
        return error.exit_code
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.Abort:
        err.write("Aborted!\n")
        return 1
    return result if isinstance(result, int) else 0
