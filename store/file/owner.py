"""The process's one owning connection to the database file.

DuckDB lets one process hold a file read-write and no other process open it at all, so inside
`budgetscope serve` everything (the group-commit writer, the dashboard's queries) goes through
one `DatabaseOwner`. Each user takes its own `cursor()`: a DuckDB cursor is a separate connection
to the same database instance, safe to use from its own thread, and reads see committed snapshots
while the writer works.

The dashboard, which Streamlit runs as a script in threads of this process, is handed the owner
in its configuration (dashboard.config, read through store/read/reader.py) instead of opening
the file (a second `duckdb.connect` would create a second database instance with its own cache
and WAL handling).

While it holds the file the owner also announces itself in a sidecar file next to it (see
`serve_sidecar_path` in store/file/database.py), so that a command that finds the file locked
can name the server and its endpoints.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import duckdb

from store.file.database import connect, serve_sidecar_path


class MemoryLimitError(ValueError):
    """DuckDB refused the memory limit asked for."""


CHECKPOINT_THRESHOLD = "128MB"


class DatabaseOwner:
    """Opens the file once; hands out cursors; closes everything once."""

    def __init__(self, path: str | os.PathLike[str], *, memory_limit: str | None = None) -> None:
        """Raises DatabaseBusy, SchemaError, and MemoryLimitError for a `memory_limit` DuckDB
        does not understand (e.g. '512MB', '2GB')."""
        self.path = str(path)
        self._con: duckdb.DuckDBPyConnection | None = connect(self.path)
        if memory_limit is not None:
            # A process that runs for months: without a limit DuckDB keeps every block it
            # touched cached, up to 80% of the machine's memory.
            try:
                self._con.execute("SET memory_limit = ?", [memory_limit])
            except duckdb.Error as error:
                self._con.close()
                raise MemoryLimitError(f"memory limit {memory_limit!r}: {error}") from None
        # DuckDB checkpoints when the WAL passes 16 MB by default: every ~28k spans, and each
        # pass costs more as the file grows (measured after 28k new spans: 0.1-0.4 s at 400k
        # spans, 0.3-2.0 s at 1.4M), blocking every commit meanwhile. At 128 MB
        # (~230k spans) it runs an eighth as often: bench_receivers gave 11.1k spans/s and p99
        # 1.0 s over 60 s against 10.0k and 1.2 s. A kill -9 then replays at most that much
        # WAL on the next open (1.5 s measured for 226 MB).
        self._con.execute("SET checkpoint_threshold = ?", [CHECKPOINT_THRESHOLD])
        self._lock = threading.Lock()
        self._sidecar: Path | None = None

    @property
    def closed(self) -> bool:
        return self._con is None

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection of its own for one thread (a reader, the writer)."""
        with self._lock:
            if self._con is None:
                raise RuntimeError(f"database {self.path} is closed")
            return self._con.cursor()

    def announce(self, details: dict[str, Any]) -> None:
        """Write the sidecar naming this process and how to reach it; removed by close()."""
        sidecar = serve_sidecar_path(self.path)
        payload = {"pid": os.getpid(), **details}
        temporary = sidecar.with_name(sidecar.name + f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        # Rename so that a reader never sees half a file.
        temporary.replace(sidecar)
        self._sidecar = sidecar

    def close(self) -> None:
        """Close the connection (and with it every cursor) and remove the sidecar. Idempotent."""
        with self._lock:
            con, self._con = self._con, None
        if con is not None:
            # Closing checkpoints: the WAL is folded into the file, so the next open is fast.
            con.close()
        if self._sidecar is not None:
            self._sidecar.unlink(missing_ok=True)
            self._sidecar = None

    def __enter__(self) -> DatabaseOwner:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
