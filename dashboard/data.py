"""The only place the dashboard touches the database: it gets a connection and calls `queries`
functions (no SQL here), with results cached by report name and filter values.

Where the connection comes from is the configuration the command gave (dashboard.config) and
store.reader: inside `budgetscope serve`, a cursor of the process's owner; on a ClickHouse
backend, the process's connection to it; standalone (`budgetscope demo`, `budgetscope
dashboard`, `streamlit run`), the file opened read-only for one page run (see
`one_open_per_run`) and closed when the page is drawn, so that the dashboard never keeps the
file locked against `budgetscope ingest` or a server between page loads.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import duckdb
import pandas as pd
import streamlit as st

from dashboard import config
from queries import prices, reports, run_search
from queries.filters import Filters
from queries.readable import missing as fmt_missing
from queries.run_search import Found, RunSearch, search_runs
from queries.run_spend import RunSpend
from queries.run_spend import run_spend as spend_of_run
from queries.run_view import RunView, SpanDetails, load_run, span_details
from simulation.data import simulation_runs, simulation_steps
from simulation.policy import SimulationPolicy
from simulation.replay import Prepared, SimulationResult, prepare, replay
from store import (
    Change,
    DatabaseBusy,
    DeclaredBudgets,
    DeclaredPrices,
    NoDatabase,
    Outcome,
    PriceChange,
    PriceOutcome,
    SharedFile,
    Source,
    clickhouse,
    explain_trace,
    listing,
    reader,
)
from store import declarations as stored_declarations

# The cache key holds the file's size and mtime (see source_token), so new data shows at once;
# the TTL only bounds how long unused results stay in memory.
TTL_SECONDS = 30
MAX_ENTRIES = 256
T = TypeVar("T")

def _source() -> Source:
    return config.current().source


def database_path() -> str:
    return _source().path


def backend_url() -> str | None:
    """The ClickHouse backend the dashboard reads, if any."""
    return _source().backend


_run_connection: ContextVar[SharedFile | None] = ContextVar("_run_connection", default=None)
# Set when a read of this page run could not open the file and the last result read for the
# same arguments was shown instead: (why, when that result was read).
_held: ContextVar[Held | None] = ContextVar("_held", default=None)


@dataclass(frozen=True)
class Held:
    """The file could not be opened for this run (`budgetscope ingest` holds it, most often):
    what the process holding it is, and when the oldest result shown instead was read."""

    reason: str
    shown_from: dt.datetime | None


@contextmanager
def one_open_per_run() -> Iterator[None]:
    """Within this block (a page run), standalone queries share one read-only open of the file,
    closed when the block ends (store.SharedFile); a page drawn from the cache opens
    nothing."""
    holder = SharedFile()
    token = _run_connection.set(holder)
    held = _held.set(None)
    try:
        yield
    finally:
        _run_connection.reset(token)
        _held.reset(held)
        holder.close()


def held() -> Held | None:
    """Whether this page run showed earlier results because the file was held (see _last)."""
    return _held.get()


# The last result read for each set of arguments, kept for the page runs that find the file
# held by a writer: standalone, `budgetscope ingest` takes the file for seconds, and a page
# that refreshed then (every --refresh-seconds while spans arrive) used to lose its content and
# the state of every widget it did not draw ("Could not draw Runs: KeyError ... rs_culprit",
# 5 of 7 trials within 1-2 s of an ingest of 6,000 spans). Bounded in entries; each is a
# result the cache held a moment before.
_LAST_KEPT = 64
_last: OrderedDict[tuple[object, ...], tuple[dt.datetime, object]] = OrderedDict()
_last_lock = threading.Lock()


def _fresh_or_last(key: tuple[object, ...], read: Callable[[], T]) -> T:
    """`read()`, kept as the last result for `key`; when it cannot open the file because
    another process holds it, the last result for `key` (noted in `held()`), else the error."""
    source = _source()
    key = (source.backend, os.path.abspath(source.path), *key)  # one file's results only
    try:
        value = read()
    except DatabaseBusy as busy:
        with _last_lock:
            kept = _last.get(key)
        if kept is None:
            raise
        read_at, value = kept
        noted = _held.get()
        oldest = read_at if noted is None or noted.shown_from is None else min(
            read_at, noted.shown_from)
        _held.set(Held(str(busy), oldest))
        return value  # type: ignore[return-value]
    with _last_lock:
        _last[key] = (dt.datetime.now(dt.UTC), value)
        _last.move_to_end(key)
        while len(_last) > _LAST_KEPT:
            _last.popitem(last=False)
    return value


def file_readable() -> bool:
    """Whether the file can be opened for reading now (no writer holds it): what a page that
    showed earlier results checks to redraw itself."""
    try:
        with reader(_source()):
            return True
    except DatabaseBusy:
        return False
    except Exception:  # noqa: BLE001 - gone, or broken: the redraw says what is wrong
        return True


@contextmanager
def connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection for one batch of queries (store.reader): the page run's shared one when
    inside `one_open_per_run`, else one closed right after."""
    with reader(_source(), shared=_run_connection.get()) as con:
        yield con


def source_token() -> tuple[object, ...]:
    """What identifies the data for cache keys: the file's state (size and mtime of the
    database and its WAL). Inside serve every commit, of spans or of their derivation, grows
    the WAL, so a page drawn after new spans arrive misses the cache and shows them: within
    the second the writer takes to derive them, instead of after the TTL. On the ClickHouse
    backend: its URL and otel_traces' row count and newest span (two cheap queries)."""
    source = _source()
    if source.backend is not None:
        con = clickhouse.connect(source.backend)
        state = clickhouse.derived_state(con) or {}
        return ("clickhouse", con.url.describe(), state.get("spans"),
                str(state.get("newest_span")))
    path = source.path
    stamps: list[object] = ["serve" if source.serving else "file", os.path.abspath(path)]
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
    arguments = (name, _iso(filters.since), _iso(filters.until), filters.agent)
    return _fresh_or_last(("report", *arguments),
                          lambda: _cached_report(*arguments, source_token()))


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _cached_search(since: str | None, until: str | None, agent: str | None,
                   search: RunSearch, source: tuple[object, ...]) -> Found:
    del source
    with connection() as con:
        return search_runs(con, _filters(since, until, agent), search)


def find_runs(filters: Filters, search: RunSearch) -> Found:
    """The runs matching `search` within the filters, one page of them (queries.run_search)."""
    arguments = (_iso(filters.since), _iso(filters.until), filters.agent, search)
    return _fresh_or_last(("search", *arguments),
                          lambda: _cached_search(*arguments, source_token()))


@st.cache_data(ttl=TTL_SECONDS, max_entries=4, show_spinner=False)
def _cached_run_ids(source: tuple[object, ...]) -> list[str]:
    del source
    with connection() as con:
        return run_search.run_ids(con)


def run_id_starts(ids: list[str]) -> list[str]:
    """Each run id cut to the shortest start no other stored run shares (at least 8
    characters), as `report runs --format table` shows it: what the run view and `budgetscope
    run` open."""
    known = _fresh_or_last(("run_ids",), lambda: _cached_run_ids(source_token()))
    return run_search.shortest_unique_starts(ids, known)


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
    """The stored runs in `filters` made ready for replay (simulation.replay.prepare)."""
    arguments = (_iso(filters.since), _iso(filters.until), filters.agent)
    return _fresh_or_last(("simulation", *arguments),
                          lambda: _cached_simulation_inputs(*arguments, source_token()))


# Replays per filter and policy (0.17 s each over 586k steps): a page run that changes no
# policy (another widget, a page drawn again) and a slider moved back draw from here.
# `_policy` is the policy itself, left out of the key (its caps mapping cannot be hashed);
# `policy_key` stands for it.
@st.cache_resource(ttl=TTL_SECONDS, max_entries=16, show_spinner=False)
def _cached_replay(since: str | None, until: str | None, agent: str | None,
                   policy_key: tuple[object, ...], source: tuple[object, ...],
                   _policy: SimulationPolicy) -> SimulationResult:
    del policy_key
    return replay(_cached_simulation_inputs(since, until, agent, source), _policy)


def simulation(filters: Filters, policy: SimulationPolicy) -> SimulationResult:
    """The runs in `filters` replayed under `policy` (simulation.replay.replay)."""
    arguments = (_iso(filters.since), _iso(filters.until), filters.agent)
    try:
        return _cached_replay(*arguments, policy.key(), source_token(), policy)
    except DatabaseBusy:  # the last inputs read, as simulation_inputs keeps them
        return replay(simulation_inputs(filters), policy)


def clear_cache() -> None:
    """Forget cached results (the sidebar's Reload), e.g. to see spans that just arrived."""
    _cached_report.clear()
    _cached_run.clear()
    _cached_span_details.clear()
    _cached_explanation.clear()
    _cached_simulation_inputs.clear()
    _cached_replay.clear()
    _cached_run_spend.clear()
    _cached_price_check.clear()


@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def _cached_run_spend(run_id: str, budget_nano: int | None,
                      source: tuple[object, ...]) -> RunSpend:
    del source
    with connection() as con:
        return spend_of_run(con, {"run_id": run_id, "usd_budget_nano": budget_nano})


def run_spend(summary: pd.Series) -> RunSpend:
    """The run's metered calls in bill order, their cumulative known cost and the call that
    reached its dollar budget (queries.run_spend), for the run view's chart."""
    budget = summary.get("usd_budget_nano")
    arguments = (str(summary["run_id"]), None if fmt_missing(budget) else int(budget))
    return _fresh_or_last(("spend", *arguments),
                          lambda: _cached_run_spend(*arguments, source_token()))


def run_view(run_id: str) -> RunView:
    """One run for the on-call view. Raises queries.run_view.RunNotFound."""
    run_id = run_id.strip().lower()
    return _fresh_or_last(("run", run_id), lambda: _cached_run(run_id, source_token()))


@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def _cached_span_details(run_id: str, trace_id: str, span_id: str,
                         source: tuple[object, ...]) -> list[SpanDetails]:
    del source
    with connection() as con:
        return span_details(con, run_id, trace_id, span_id)


@st.cache_data(ttl=TTL_SECONDS, max_entries=16, show_spinner=False)
def _cached_explanation(trace_id: str, source: tuple[object, ...]) -> pd.DataFrame | None:
    del source
    with connection() as con:
        if not isinstance(con, duckdb.DuckDBPyConnection):
            return None  # the ClickHouse backend: the recognition runs on DuckDB only
        return explain_trace(con, trace_id)


def span_explanation(trace_id: str) -> pd.DataFrame | None:
    """Why each span of the trace is, or is not, a step (store.explain); None on the
    ClickHouse backend."""
    return _fresh_or_last(("explanation", trace_id),
                          lambda: _cached_explanation(trace_id, source_token()))


def step_details(run_id: str, trace_id: str, span_id: str) -> SpanDetails | None:
    """What one step's span carries (attributes, events, status), for the run view."""
    found = _fresh_or_last(("details", run_id, span_id),
                           lambda: _cached_span_details(run_id, trace_id, span_id,
                                                        source_token()))
    return found[0] if found else None


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
    traces_failed_derivation: int = 0  # recorded by store/derive/pending.py, left out of runs

    @property
    def empty(self) -> bool:
        return self.runs == 0 and not self.spans


def status() -> DatabaseStatus:
    """Counts for the sidebar and the empty state. Raises NoDatabase or DatabaseBusy."""
    source = _source()
    serving, path = source.serving, source.describe()
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
    """The declared budgets and caps (docs/guide.md#declaring-budgets, docs/metrics.md §11.5): what,
    scope, target (None for the default), duration_ms, declared_at, tokens, usd_nano,
    usd_per_week_nano; None on the ClickHouse backend, where they are not read here."""
    if backend_url() is not None:
        return None

    def read() -> list[dict[str, object]]:
        with connection() as con:
            return [d.to_json() for d in stored_declarations(con)]

    rows = _fresh_or_last(("declarations",), read)
    frame = pd.DataFrame(rows, columns=["what", "scope", "target", "duration_ms",
                                        "declared_at", "tokens", "usd_nano",
                                        "usd_per_week_nano"])
    # whole numbers kept whole (a float column would round nano-dollars past 2^53)
    for column in ("tokens", "usd_nano", "usd_per_week_nano"):
        frame[column] = pd.Series([row.get(column) for row in rows], index=frame.index,
                                  dtype=object)
    return frame


@st.cache_data(ttl=TTL_SECONDS, max_entries=4, show_spinner=False)
def _cached_price_check(source: tuple[object, ...]) -> pd.DataFrame:
    del source
    with connection() as con:
        return prices.price_check(con)


def price_check() -> pd.DataFrame:
    """Every model seen without a price, with its steps and the command that prices it
    (queries.prices, what `budgetscope prices check` lists, over every stored trace), on the
    file or on the ClickHouse backend."""
    return _fresh_or_last(("price_check",), lambda: _cached_price_check(source_token()))


def price_listing() -> dict[str, object] | None:
    """What `budgetscope prices list` shows: the prices set and the bundled table (store's
    listing); None on the ClickHouse backend. Read when the Budgets page asks, never cached
    past the page's run: a price just set shows at once."""
    if backend_url() is not None:
        return None

    def read() -> dict[str, object]:
        with connection() as con:
            return listing(con)

    return _fresh_or_last(("prices",), read)


def price_editor() -> DeclaredPrices | None:
    """Who may change prices from the dashboard: inside `budgetscope serve`, the server's
    writer (as budget_editor); standalone, nobody (`budgetscope prices` does)."""
    configured = config.current()
    if configured.source.backend is not None or not configured.source.serving:
        return None
    return configured.prices


def change_price(change: PriceChange) -> PriceOutcome:
    """Store a price change through the server's writer, wait for the runs it re-prices and
    forget cached results. Raises PriceError (nothing stored) and RuntimeError when this
    dashboard cannot edit."""
    editor = price_editor()
    if editor is None:
        raise RuntimeError("this dashboard cannot change prices: use budgetscope prices")
    outcome = editor.apply(change)
    clear_cache()
    return outcome


def budget_editor() -> DeclaredBudgets | None:
    """Who may change declarations from the dashboard: inside `budgetscope serve`, the
    server's writer (its Streamlit process owns the file); standalone, nobody (the file is
    only opened read-only here, and changes are made with `budgetscope budgets`)."""
    configured = config.current()
    if configured.source.backend is not None or not configured.source.serving:
        return None
    return configured.editor


def change_declaration(change: Change) -> Outcome:
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


__all__ = ["DatabaseBusy", "DatabaseStatus", "Held", "NoDatabase", "budget_editor",
           "change_declaration", "change_price", "clear_cache", "connection", "database_path",
           "declarations", "file_readable", "held", "price_check", "price_editor",
           "price_listing", "report", "run_spend", "run_view", "source_token", "status"]
