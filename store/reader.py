"""The one way every command and the dashboard open what they read.

`Source` says where the data is; `open_reader` opens it:
- inside `budgetscope serve` (`owner` set), a cursor of the process's one owning connection
  (a second `duckdb.connect` in that process would fail, and would be a second database
  instance with its own cache);
- a ClickHouse backend (`backend` set), the process's connection to it, its derived tables
  brought up to date first;
- else the DuckDB file `db`: read-only for the dashboard, which must never keep the file
  locked against `budgetscope ingest` between page loads; read-write for the commands, which
  first derive what a stopped writer left marked (`catch_up`), since read-only connections
  cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from store import clickhouse
from store.database import DEFAULT_DB, connect
from store.owner import DatabaseOwner
from store.scheduling import CatchUp, catch_up

# A DuckDB connection, or another dialect's (store.clickhouse.ClickHouseConnection).
Reader = Any


class NoDatabase(LookupError):
    """No database file at the configured path (and no server owning one)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"no database at {path}")
        self.path = path


@dataclass(frozen=True)
class Source:
    """Where the data is: the DuckDB file `db`, through `owner` when this process serves it,
    or the ClickHouse backend `backend` (a URL, store.clickhouse.parse_backend_url)."""

    db: str = DEFAULT_DB
    backend: str | None = None
    owner: DatabaseOwner | None = None

    @property
    def serving(self) -> bool:
        """This process owns the file (`budgetscope serve`)."""
        return self.backend is None and self.owner is not None and not self.owner.closed

    @property
    def path(self) -> str:
        return self.owner.path if self.serving else self.db  # type: ignore[union-attr]

    def describe(self) -> str:
        """The file's path, or the backend's URL without its password."""
        if self.backend is not None:
            return clickhouse.parse_backend_url(self.backend).describe()
        return self.path


class SharedFile:
    """One read-only open of the file shared by a batch of reads (a dashboard page run),
    opened on its first use and closed by `close()`: a page's first view misses the cache for
    all its reports, and opening the file for each of them cost ~0.1-0.2 s more per page on
    1.4M spans (each open also starts with DuckDB's buffer pool empty)."""

    def __init__(self) -> None:
        self.con: duckdb.DuckDBPyConnection | None = None

    def get(self, path: str) -> duckdb.DuckDBPyConnection:
        if self.con is None:
            self.con = connect(path, read_only=True)  # DatabaseBusy when a server holds it
        return self.con

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None


@dataclass
class Opened:
    """An open reader and how to let it go."""

    connection: Reader
    close: Callable[[], None]


def _nothing() -> None:
    pass


def open_reader(source: Source, *, caught_up: Callable[[CatchUp], None] | None = None,
                shared: SharedFile | None = None) -> Opened:
    """Open `source` for reading. With `caught_up` the DuckDB file is opened read-write and
    what is left marked is derived first (`caught_up` is told what could not be); without, it
    is opened read-only, through `shared` when given. Raises NoDatabase, DatabaseBusy,
    SchemaError, duckdb.Error; on the backend BackendError, NoTraces and the engine's errors."""
    if source.backend is not None:
        con = clickhouse.connect(source.backend)  # kept open: one session per process
        clickhouse.ensure_derived(con)
        return Opened(con, _nothing)
    if source.serving:
        cursor = source.owner.cursor()  # type: ignore[union-attr]
        return Opened(cursor, cursor.close)
    if not Path(source.db).exists():
        raise NoDatabase(source.db)
    if caught_up is not None:
        con = connect(source.db)
        try:
            caught_up(catch_up(con))
        except BaseException:
            con.close()
            raise
        return Opened(con, con.close)
    if shared is not None:
        return Opened(shared.get(source.db), _nothing)
    con = connect(source.db, read_only=True)  # raises DatabaseBusy when a server holds it
    return Opened(con, con.close)


@contextmanager
def reader(source: Source, *, caught_up: Callable[[CatchUp], None] | None = None,
           shared: SharedFile | None = None) -> Iterator[Reader]:
    """`open_reader` as a context manager: the reader is let go when the block ends."""
    opened = open_reader(source, caught_up=caught_up, shared=shared)
    try:
        yield opened.connection
    finally:
        opened.close()
