"""The only place the dashboard touches the database: it gets a connection and calls `queries`
functions (no SQL here), with results cached by report name and filter values.

Where the connection comes from:
- inside `budgetscope serve`, the process owns the file: read through a cursor of
  `ingest.owner.current_owner()` (a second `duckdb.connect` in that process would fail);
- standalone (`budgetscope demo`, `budgetscope dashboard`, `streamlit run`), open the file named
  by env BUDGETSCOPE_DB read-only for one page run (see `one_open_per_run`) and close it when
  the page is drawn, so that the dashboard never keeps the file locked against
  `budgetscope ingest` or a server between page loads.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import streamlit as st

from ingest import declared_budgets, declared_service
from ingest.database import DB_ENV, DEFAULT_DB, DatabaseBusy, connect
from ingest.declared_service import DeclaredBudgets
from ingest.owner import current_owner
from queries import clickhouse, reports
from queries.filters import Filters
from queries.run_search import Found, RunSearch, search_runs
from queries.run_view import RunView, load_run
from queries.simulation import Prepared, SimulationResult, prepare, replay
from queries.simulation_data import simulation_runs, simulation_steps
from queries.simulation_policy import SimulationPolicy

# The cache key holds the file's size and mtime (see source_token), so new data shows at once;
# the TTL only bounds how long unused results stay in memory.
TTL_SECONDS = 30
MAX_ENTRIES = 256

class NoDatabase(LookupError):
    """No database file at the configured path (and no server owning one)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"no database at {path}")
        self.path = path


def database_path() -> str:
    return os.environ.get(DB_ENV) or DEFAULT_DB


def backend_url() -> str | None:
    """The ClickHouse backend the dashboard reads (env BUDGETSCOPE_BACKEND), if any."""
    return os.environ.get(clickhouse.BACKEND_ENV) or None


@contextmanager
def _clickhouse_connection(url: str) -> Iterator[clickhouse.ClickHouseConnection]:
    """The process's connection to the backend (kept open: chdb holds one session per folder,
    a server client is reusable), its derived tables brought up to date first."""
    con = clickhouse.connect(url)
    clickhouse.ensure_derived(con)
    yield con


class _RunConnection:
    """The read-only connection of one page run, opened on its first cache miss."""

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


_run_connection: ContextVar[_RunConnection | None] = ContextVar("_run_connection", default=None)


@contextmanager
def one_open_per_run() -> Iterator[None]:
    """Within this block (a page run), standalone queries share one read-only open of the file,
    closed when the block ends. A page's first view misses the cache for all its reports, and
    opening the file for each of them cost ~0.1-0.2 s more per page on 1.4M spans (each open
    also starts with DuckDB's buffer pool empty); a page drawn from the cache opens nothing."""
    holder = _RunConnection()
    token = _run_connection.set(holder)
    try:
        yield
    finally:
        _run_connection.reset(token)
        holder.close()


@contextmanager
def connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection for one batch of queries (the provider): the page run's shared one when
    inside `one_open_per_run`, else one closed right after."""
    backend = backend_url()
    if backend is not None:
        with _clickhouse_connection(backend) as con:
            yield con  # type: ignore[misc]
        return
    owner = current_owner()
    if owner is not None:
        cursor = owner.cursor()
        try:
            yield cursor
        finally:
            cursor.close()
        return
    path = database_path()
    if not Path(path).exists():
        raise NoDatabase(path)
    shared = _run_connection.get()
    if shared is not None:
        yield shared.get(path)
        return
    con = connect(path, read_only=True)  # raises DatabaseBusy when a server holds it
    try:
        yield con
    finally:
        con.close()


def source_token() -> tuple[object, ...]:
    """What identifies the data for cache keys: the file's state (size and mtime of the
    database and its WAL). Inside serve every commit, of spans or of their derivation, grows
    the WAL, so a page drawn after new spans arrive misses the cache and shows them: within
    the second the writer takes to derive them, instead of after the TTL. On the ClickHouse
    backend: its URL and otel_traces' row count and newest span (two cheap queries)."""
    backend = backend_url()
    if backend is not None:
        con = clickhouse.connect(backend)
        state = clickhouse.derived_state(con) or {}
        return ("clickhouse", con.url.describe(), state.get("spans"),
                str(state.get("newest_span")))
    owner = current_owner()
    path = owner.path if owner is not None else database_path()
    stamps: list[object] = ["serve" if owner is not None else "file", os.path.abspath(path)]
    for candidate in (path, f"{path}.wal"):
        try:
            stat = os.stat(candidate)
        except OSError:
            stamps.append(None)
        else:
            stamps.append((stat.st_mtime_ns, stat.st_size))
    return tuple(stamps)


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _filters(since: str | None, until: str | None, agent: str | None) -> Filters:
    return Filters(None if since is None else dt.datetime.fromisoformat(since),
                   None if until is None else dt.datetime.fromisoformat(until), agent)


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _cached_report(name: str, since: str | None, until: str | None, agent: str | None,
                   source: tuple[object, ...]) -> pd.DataFrame:
    # `source` is only part of the key: a new file state or another server misses the cache.
    del source
    with connection() as con:
        return reports.ALL[name](con, _filters(since, until, agent))


def report(name: str, filters: Filters) -> pd.DataFrame:
    """Report `name` of queries.reports.ALL for these filters (a cached copy: do not mutate it
    in place; st.cache_data hands each caller its own copy anyway)."""
    return _cached_report(name, _iso(filters.since), _iso(filters.until), filters.agent,
                          source_token())


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _cached_search(since: str | None, until: str | None, agent: str | None,
                   search: RunSearch, source: tuple[object, ...]) -> Found:
    del source
    with connection() as con:
        return search_runs(con, _filters(since, until, agent), search)


def find_runs(filters: Filters, search: RunSearch) -> Found:
    """The runs matching `search` within the filters, one page of them (queries.run_search)."""
    return _cached_search(_iso(filters.since), _iso(filters.until), filters.agent, search,
                          source_token())


@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def _cached_run(run_id: str, source: tuple[object, ...]) -> RunView:
    del source
    with connection() as con:
        return load_run(con, run_id)


# The replay's inputs (runs, steps, censored fits) per filter: built once, then each slider
# move only replays (a resource, not data: a Prepared is large and replay never mutates it).
@st.cache_resource(ttl=TTL_SECONDS, max_entries=8, show_spinner=False)
def _cached_simulation_inputs(since: str | None, until: str | None, agent: str | None,
                              source: tuple[object, ...]) -> Prepared:
    del source
    filters = _filters(since, until, agent)
    with connection() as con:
        runs, steps = simulation_runs(con, filters), simulation_steps(con, filters)
    return prepare(runs, steps)


def simulation_inputs(filters: Filters) -> Prepared:
    """The stored runs in `filters` made ready for replay (queries.simulation.prepare)."""
    return _cached_simulation_inputs(_iso(filters.since), _iso(filters.until), filters.agent,
                                     source_token())


def simulation(filters: Filters, policy: SimulationPolicy) -> SimulationResult:
    """The runs in `filters` replayed under `policy` (queries.simulation.replay)."""
    return replay(simulation_inputs(filters), policy)


def clear_cache() -> None:
    """Forget cached results (the sidebar's Reload), e.g. to see spans that just arrived."""
    _cached_report.clear()
    _cached_run.clear()
    _cached_simulation_inputs.clear()


def run_view(run_id: str) -> RunView:
    """One run for the on-call view. Raises queries.run_view.RunNotFound."""
    return _cached_run(run_id.strip().lower(), source_token())


@dataclass(frozen=True)
class DatabaseStatus:
    """What the database holds."""

    path: str
    serving: bool
    runs: int
    agents: tuple[str, ...]
    spans: int
    newest_received: pd.Timestamp | None
    newest_run_start: str | None = None  # ISO UTC, as the runs report writes a start
    traces_failed_derivation: int = 0  # recorded by ingest/derivation.py, left out of runs

    @property
    def empty(self) -> bool:
        return self.runs == 0 and not self.spans


def status() -> DatabaseStatus:
    """Counts for the sidebar and the empty state. Raises NoDatabase or DatabaseBusy."""
    serving = current_owner() is not None
    path = current_owner().path if serving else database_path()  # type: ignore[union-attr]
    if backend_url() is not None:
        path = clickhouse.parse_backend_url(str(backend_url())).describe()
    everything = Filters()
    by_agent = report("runs_by_agent", everything)
    agents = tuple(sorted(str(a) for a in by_agent["agent"].dropna()))
    row = report("database_status", everything).iloc[0]
    spans = int(row["spans"])
    newest = None if pd.isna(row["newest_received"]) else pd.Timestamp(row["newest_received"])
    newest_ns = by_agent["newest_start_ns"].max()
    newest_run = None if pd.isna(newest_ns) else _iso_ms(int(newest_ns))
    failed = row.get("traces_failed_derivation", 0)
    return DatabaseStatus(path, serving, int(by_agent["runs"].sum()), agents, spans, newest,
                          newest_run, 0 if pd.isna(failed) else int(failed))


def declarations() -> pd.DataFrame | None:
    """The declared budgets and caps (SPEC §10): what, scope, target (None for the default),
    duration_ms, declared_at; None on the ClickHouse backend, where they are not read here."""
    if backend_url() is not None:
        return None
    with connection() as con:
        rows = [d.to_json() for d in declared_budgets.declarations(con)]
    return pd.DataFrame(rows, columns=["what", "scope", "target", "duration_ms",
                                       "declared_at"])


def budget_editor() -> DeclaredBudgets | None:
    """Who may change declarations from the dashboard: inside `budgetscope serve`, the
    server's writer (its Streamlit process owns the file); standalone, nobody (the file is
    only opened read-only here, and changes are made with `budgetscope budgets`)."""
    if backend_url() is not None or current_owner() is None:
        return None
    return declared_service.current()


def change_declaration(change: declared_budgets.Change) -> declared_service.Outcome:
    """Store a change through the server's writer and forget cached results. Raises
    DeclarationError (nothing stored) and RuntimeError when this dashboard cannot edit."""
    editor = budget_editor()
    if editor is None:
        raise RuntimeError("this dashboard cannot change declarations: use budgetscope budgets")
    outcome = editor.apply(change)
    clear_cache()
    return outcome


def _iso_ms(ns: int) -> str:
    """Epoch ns as the runs report writes a start: ISO 8601 UTC to the millisecond."""
    moment = dt.datetime.fromtimestamp(ns // 1_000_000_000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ns // 1_000_000 % 1000:03d}Z"


__all__ = ["DatabaseBusy", "DatabaseStatus", "NoDatabase", "budget_editor",
           "change_declaration", "clear_cache", "connection", "database_path", "declarations",
           "report", "run_view", "source_token", "status"]
