"""The one way every command and the dashboard open what they read.

`Source` says where the data is; `open_reader` opens it:
- inside `budgetscope serve` (`owner` set), a cursor of the process's one owning connection
  (a second `duckdb.connect` in that process would fail, and would be a second database
  instance with its own cache);
- a ClickHouse backend (`backend` set), the process's connection to it, its derived tables
  brought up to date first;
- else the DuckDB file `db`, read-only, so that any number of readers open it at once (the
  dashboard, which must never keep it locked against `budgetscope ingest` between page loads,
  and the read commands, several on-call terminals side by side), on a read-only file system
  or directory too. What a stopped writer left (derivation marks, an older schema) needs a
  read-write open: a command takes one only when it can at once (`open_for_reading`: no other
  process has the file), derives or migrates, lets go and reads read-only; otherwise it reads
  the file as it is and says that its numbers may lag. Catching up is the writers' business
  (`serve`, `ingest`, `retain`, `budgets`): they do it whenever they open the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

import store.clickhouse as clickhouse
from store.derive.pending import PendingDerivations
from store.derive.scheduling import CatchUp, catch_up
from store.file.database import DEFAULT_DB, READER_WAIT_SECONDS, DatabaseBusy, connect
from store.file.ddl import SchemaError, up_to_date
from store.file.owner import DatabaseOwner

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
        con = open_for_reading(source.db, caught_up)
        return Opened(con, con.close)
    if shared is not None:
        return Opened(shared.get(source.db), _nothing)
    con = connect(source.db, read_only=True)  # raises DatabaseBusy when a server holds it
    return Opened(con, con.close)



def open_for_reading(path: str, caught_up: Callable[[CatchUp], None]
                     ) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the file at `path`, as nobody serves it. When a stopped writer
    left traces marked, or the file's schema is older: derived or migrated first through a
    read-write open taken only if it is free at once, and `caught_up` told what could not be
    done (the traces left marked, and why). Raises DatabaseBusy, SchemaError, duckdb.Error."""
    con = connect(path, read_only=True, wait_seconds=READER_WAIT_SECONDS)
    try:
        current = up_to_date(con)
        marked = PendingDerivations.count(con) if current else 0
    except BaseException:
        con.close()
        raise
    if current and not marked:
        return con  # the common case: nothing to write, read-only at once
    con.close()
    try:
        # No wait: other readers have it open (their read locks keep a writer out), or the file
        # system or directory is read-only.
        writer = connect(path)
    except (DatabaseBusy, duckdb.IOException, duckdb.PermissionException, OSError) as error:
        con = connect(path, read_only=True, wait_seconds=READER_WAIT_SECONDS)
        if not up_to_date(con):
            con.close()
            raise SchemaError("the file's schema is older than this budgetscope's and must be "
                              "migrated, which needs opening it for writing: "
                              f"{_first(error)}") from None
        caught_up(CatchUp(marked, "the file cannot be opened for writing to derive them now "
                          f"({_first(error)}); the next command that can will"))
        return con
    try:
        caught_up(catch_up(writer))
    finally:
        writer.close()
    return connect(path, read_only=True, wait_seconds=READER_WAIT_SECONDS)


def _first(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


@contextmanager
def reader(source: Source, *, caught_up: Callable[[CatchUp], None] | None = None,
           shared: SharedFile | None = None) -> Iterator[Reader]:
    """`open_reader` as a context manager: the reader is let go when the block ends."""
    opened = open_reader(source, caught_up=caught_up, shared=shared)
    try:
        yield opened.connection
    finally:
        opened.close()
