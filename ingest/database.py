"""Opening the DuckDB file: one owner at a time, and a clear message when someone else owns it.

DuckDB lets one read-write process hold a database file, and no other process may open it then,
not even read-only. When the file is taken we say which process holds it and how to send data to
it instead, rather than hang or print the driver's traceback.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

from ingest.ddl import apply_schema

DEFAULT_DB = "budgetscope.duckdb"
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")


class DatabaseBusy(RuntimeError):
    """Another process holds the database file."""

    def __init__(self, path: str, pid: int | None, command: str | None) -> None:
        holder = f"process {pid}" if pid else "another process"
        if command:
            holder += f" ({command})"
        super().__init__(
            f"{path} is held by {holder}. DuckDB allows one process per database file. "
            "If that is `budgetscope serve`, send data to its OTLP endpoints instead "
            "(http://127.0.0.1:4318/v1/traces or 127.0.0.1:4317) and read reports from its "
            "dashboard; otherwise stop it, or use another --db.")
        self.path, self.pid, self.command = path, pid, command


def _command_line(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part) or None


def connect(path: str | os.PathLike[str], *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the database and its schema. Raises DatabaseBusy."""
    text = str(path)
    try:
        if read_only:
            return duckdb.connect(text, read_only=True)
        con = duckdb.connect(text)
    except duckdb.IOException as error:
        match = _LOCK_HOLDER.search(str(error))
        if match:
            pid = int(match["pid"])
            raise DatabaseBusy(text, pid, _command_line(pid) or match["program"]) from None
        raise
    try:
        apply_schema(con)
    except Exception:
        con.close()
        raise
    return con
