"""Opening the DuckDB file: one owner at a time, and a clear message when someone else owns it.

DuckDB lets one read-write process hold a database file, and no other process may open it then,
not even read-only. When the file is taken we say which process holds it and how to send data to
it instead, rather than hang or print the driver's traceback.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import duckdb

from store.file.ddl import apply_schema

DEFAULT_DB = "budgetscope.duckdb"
# The CLI's --db, the dashboard's data provider and `budgetscope dashboard` all read this.
DB_ENV = "BUDGETSCOPE_DB"
# --backend's environment variable: the ClickHouse backend's URL (store/clickhouse/). Here, beside
# DB_ENV, so that the CLI names it without importing the backend (pandas, pyarrow).
BACKEND_ENV = "BUDGETSCOPE_BACKEND"
# How long a reader waits for another reader that holds the file read-write for a moment to
# derive what a stopped writer left (store/read/reader.py's open_for_reading): a catch-up of a
# crash's leftovers takes seconds; a holder that is not done by then is named in the error.
# Here, not in read/ (whose reader imports the ClickHouse backend, pandas and pyarrow), for the
# commands that open the file without the reader (`budgetscope budgets list`; issue 48).
READER_WAIT_SECONDS = 5.0
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")


class DatabaseBusy(RuntimeError):
    """Another process holds the database file."""

    def __init__(self, path: str, pid: int | None, command: str | None,
                 server: dict[str, Any] | None = None) -> None:
        if server is not None:
            # The holder is a `budgetscope serve` that announced itself: name its real endpoints.
            super().__init__(
                f"{path} is held by budgetscope serve (pid {pid}): send data to "
                f"{server['otlp_http']} (OTLP/HTTP) or {server['otlp_grpc']} (OTLP/gRPC)"
                + (f" and read it on {server['dashboard']}" if server.get("dashboard") else "")
                + "; or stop that server (SIGTERM) first, or use another --db.")
            self.path, self.pid, self.command, self.server = path, pid, command, server
            return
        holder = f"process {pid}" if pid else "another process"
        if command:
            holder += f" ({command})"
        super().__init__(
            f"{path} is held by {holder}. DuckDB allows one process per database file. "
            "If that is `budgetscope serve`, send data to its OTLP endpoints instead "
            "(http://127.0.0.1:4318/v1/traces or 127.0.0.1:4317) and read reports from its "
            "dashboard; otherwise stop it, or use another --db.")
        self.path, self.pid, self.command, self.server = path, pid, command, None


def serve_sidecar_path(path: str | os.PathLike[str]) -> Path:
    """Where `budgetscope serve` announces itself while it holds the database at `path`."""
    return Path(f"{path}.serve.json")


def _serve_announcement(path: str, pid: int) -> dict[str, Any] | None:
    """The sidecar of the server holding `path`, when it is the process DuckDB names."""
    try:
        announced = json.loads(serve_sidecar_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(announced, dict) or announced.get("pid") != pid:
        return None  # a stale file left by a killed server, not the current holder
    if not all(isinstance(announced.get(key), str) for key in ("otlp_http", "otlp_grpc")):
        return None
    return announced


def _command_line(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part) or None


def connect(path: str | os.PathLike[str], *, read_only: bool = False,
            wait_seconds: float = 0.0) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the database and its schema. Raises DatabaseBusy: at once when
    a `budgetscope serve` holds the file (it never lets go), else once `wait_seconds` have
    passed without the process holding it letting go (a reader deriving what a stopped writer
    left, a dashboard's page run, a report: seconds at most, see store/read/reader.py)."""
    text = str(path)
    deadline = time.monotonic() + wait_seconds
    pause = 0.05
    while True:
        try:
            con = duckdb.connect(text, read_only=read_only)
            break
        except duckdb.IOException as error:
            match = _LOCK_HOLDER.search(str(error))
            if not match:
                raise
            pid = int(match["pid"])
            busy = DatabaseBusy(text, pid, _command_line(pid) or match["program"],
                                _serve_announcement(text, pid))
            if busy.server is not None or time.monotonic() + pause > deadline:
                raise busy from None
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
    # DuckDB draws its own progress bar on stdout for queries over 2 s; ours (ingest
    # --progress) is the one asked for, and a second one garbles logs and piped CSV.
    con.execute("SET enable_progress_bar = false")
    if read_only:
        return con
    try:
        apply_schema(con)
    except Exception:
        con.close()
        raise
    return con
