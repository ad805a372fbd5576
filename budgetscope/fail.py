"""The error a command, or `budgetscope serve` starting, ends with, and a trace file given where
the database goes: what both the CLI (commands/) and the server (server/) say when they cannot
go on, so that neither imports the other for it."""

from __future__ import annotations

import click

from queries.terminal import terminal_safe


class Fail(click.ClickException):
    """A one-line error and exit status 1, never a traceback. The message may quote span data
    (an agent's name, a server's answer): it is made inert for a terminal."""

    exit_code = 1

    def format_message(self) -> str:
        return terminal_safe(self.message, keep_newlines=True)


# What a file handed to --db starts with when it is a trace file, not a database.
_TRACE_FILE_STARTS = (b"\x1f\x8b", b"{", b"[")
_TRACE_FILE_ENDS = (".gz", ".json", ".jsonl", ".pb", ".proto")
# A DuckDB file has its magic at bytes 8-11 (after the header block's checksum).
_DUCKDB_MAGIC = b"DUCK"


def refuse_trace_file(db: str) -> None:
    """A trace file (a .gz, .json or .jsonl) given as --db instead of to `ingest`: refused
    with the fix before DuckDB opens it, which it would try to as a database."""
    try:
        with open(db, "rb") as file:
            head = file.read(16)
    except OSError:
        return  # missing or unreadable: the usual messages say so
    if head[8:12] == _DUCKDB_MAGIC:
        return  # a DuckDB file, whatever its first (checksum) bytes happen to be
    if head.lstrip().startswith(_TRACE_FILE_STARTS) or db.endswith(_TRACE_FILE_ENDS):
        raise Fail(f"{db} is a trace file, not a database: load it with "
                   f"`budgetscope --db budgetscope.duckdb ingest {db}`, then give that "
                   "database as --db")
