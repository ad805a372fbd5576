"""The ClickHouse backend: the same analyses, run where the Collector's ClickHouse exporter writes.

A backend URL picks the engine:
- `chdb:///path/to/folder` (or `chdb://relative/folder`): ClickHouse in-process (the chdb
  package), on the data folder given; what the tests and bench/bench_clickhouse.py run on;
- `clickhouse://user[:password]@host[:port]/database`: a ClickHouse server over HTTP through the
  optional clickhouse-connect package (`pip install 'budgetscope[clickhouse]'`); the password may
  instead come from env BUDGETSCOPE_CLICKHOUSE_PASSWORD. NOT exercised by the tests (no server
  in CI): the SQL is the one the chdb tests run, the transport is clickhouse-connect's.

Report queries come from queries/sql/clickhouse/ (queries.loader.CLICKHOUSE_QUERIES); the
backend's own tables and derivation from sql/ beside this module (store/clickhouse/sql/,
backend_queries()); values are always bound as
ClickHouse query parameters (`{since_ns:Nullable(Int64)}`), never formatted into the text.
Only results travel: report rows (aggregates; for `runs`, one row per run; for the run view,
one run's steps), never spans. chdb allows one data folder per process at a time.

This module is the room's API (the front exports it as `store.clickhouse`); declared.py keeps
the declared budgets and caps on ClickHouse (`store.clickhouse_declared`), in sql/declared/.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import pandas as pd
import pyarrow as pa

from store.clickhouse import prices
from store.derive.scheduling import ROOT_GRACE_SECONDS
from store.derive.statements import with_conventions
from store.file.database import BACKEND_ENV as BACKEND_ENV  # beside DB_ENV: see there
from store.file.sql_files import (
    CLICKHOUSE_PARAMETER,
    Query,
    bound_parameters,
    load_queries,
    split_statements,
)

PASSWORD_ENV = "BUDGETSCOPE_CLICKHOUSE_PASSWORD"
BACKEND_SCHEMES = ("chdb", "clickhouse")

# Every query runs with these: ClickHouse's JOIN otherwise fills a missing side with default
# values (0, '') where DuckDB, and so every definition here, gives NULL; and formatDateTime's
# %f prints as many digits as the value's scale (3: milliseconds, DuckDB strftime's %g, as
# queries/translate.py maps it) instead of always 6.
SESSION_SETTINGS: dict[str, Any] = {"join_use_nulls": 1,
                                    "formatdatetime_f_prints_scale_number_of_digits": 1}
# The only tables rows are inserted into (their names are shaped into the INSERT's text, so
# they come from this list, never from a caller's string).
INSERTABLE_TABLES = frozenset({"otel_traces", "otel_logs", *prices.BUNDLED_TABLES.values()})
_COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
# The backend's own files: the Collector exporter's tables, and the derivation that builds runs
# and steps there (rebuilt whole, or re-measured when only declarations or prices changed:
# derive_state says when).
BACKEND_FOLDER = Path(__file__).with_name("sql")
BACKEND_NAMES = frozenset({
    "otel_traces_table", "otel_logs_table", "derive_build", "derive_walk", "derive_recognise",
    "derive_steps", "derive_budgeted", "derive_usage", "derive_cost", "derive_measure",
    "derive_remeasure", "derive_log_exceptions", "derive_log_exceptions_none",
    "derive_scratch_drop", "derive_state",
})
# The build, in order: the spans, the walk, the wrappers it took for steps, the walk again for
# their traces (derive_build.sql says why the walk runs twice), the steps and runs, the declared
# budgets and caps applied to them, the spans that carry usage and their cost (docs/metrics.md
# §11), then what depends on budgets (as the DuckDB derivation's files: derive_steps,
# derive_usage, derive_cost, derive_measure). The models the metered spans bring are matched to
# the bundled prices, in Python, before MATCH_PRICES_BEFORE (prices.match_new_pairs).
DERIVE_BUILD = ("derive_build", "derive_walk", "derive_recognise", "derive_walk", "derive_steps",
                "derive_budgeted", "derive_usage", "derive_cost", "derive_measure")
MATCH_PRICES_BEFORE = "derive_cost"
# A re-measure (only the declarations or prices changed): the stored runs, steps and metered
# spans read back (derive_remeasure.sql), then the build's last files on them (as the DuckDB
# derivation's remeasure_touched).
DERIVE_REMEASURE = ("derive_remeasure", "derive_budgeted", "derive_cost", "derive_measure")
# What a re-measure reads besides the runs, steps and metered spans: a derivation stored before
# they were kept is built whole once.
REMEASURE_READS = ("budgetscope_own_budgets", "budgetscope_step_lifts")


@functools.cache
def backend_queries() -> dict[str, Query]:
    """The backend's own files with the conventions written in, read when first used: a
    tenth of a second of CPU that a command on a DuckDB file (which imports this package)
    never pays."""
    return with_conventions(
        load_queries(BACKEND_FOLDER, BACKEND_NAMES, CLICKHOUSE_PARAMETER), "clickhouse")


class BackendError(ValueError):
    """A backend URL that cannot be used, or an engine that is not installed."""


@dataclass(frozen=True)
class BackendUrl:
    scheme: str  # chdb or clickhouse
    path: str = ""  # chdb data folder
    host: str = "127.0.0.1"
    port: int = 8123
    user: str = "default"
    password: str = ""
    database: str = "default"

    def describe(self) -> str:
        """The URL without its password, for messages and cache keys."""
        if self.scheme == "chdb":
            return f"chdb://{self.path}"
        return f"clickhouse://{self.user}@{self.host}:{self.port}/{self.database}"


def parse_backend_url(text: str) -> BackendUrl:
    parts = urlsplit(text.strip())
    if parts.scheme == "chdb":
        path = unquote((parts.netloc or "") + (parts.path or ""))
        if not path:
            raise BackendError(f"{text!r}: chdb needs a data folder, e.g. chdb:///var/lib/traces")
        return BackendUrl("chdb", path=path)
    if parts.scheme == "clickhouse":
        if not parts.hostname:
            raise BackendError(f"{text!r}: expected clickhouse://user@host:port/database")
        database = (parts.path or "/").strip("/") or "default"
        query = parse_qs(parts.query)
        try:
            port = parts.port or int(query.get("port", ["8123"])[0])
        except ValueError:
            raise BackendError(f"{text!r}: the port is not a number") from None
        return BackendUrl("clickhouse", host=parts.hostname, port=port,
                          user=unquote(parts.username or "default"),
                          password=unquote(parts.password or "") or os.environ.get(
                              PASSWORD_ENV, ""),
                          database=database)
    raise BackendError(f"{text!r}: a backend is chdb:///FOLDER or "
                       "clickhouse://user@host:port/database")


# ClickHouse reads a query parameter in its "escaped" format, TabSeparated's: a tab or a line
# feed ends the value and a backslash starts an escape, so a value holding one of them (an agent
# name from a span may) failed with BAD_QUERY_PARAMETER. CR and NUL are read as they are, but
# are escaped too, as TabSeparated writes them, so that nothing depends on that.
_ESCAPED = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0"})


def parameter_text(value: Any) -> str:
    """A value in ClickHouse's escaped parameter format: NULL is \\N (so a string \\N is sent
    as \\\\N), a backslash is doubled, tab, line feed, carriage return and NUL are \\t, \\n, \\r
    and \\0; every other character (quotes included) is itself."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).translate(_ESCAPED)


def _signed_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """ClickHouse's count() is a UInt64 where DuckDB's is a BIGINT: unsigned columns become
    int64, so that a report's frame has DuckDB's dtypes (a page adding a row of int64 sums to a
    uint64 column got float64: `12.0` runs). A value past int64's range stays unsigned."""
    for column in frame.columns:
        values = frame[column]
        if not pd.api.types.is_unsigned_integer_dtype(values.dtype):
            continue
        largest = values.max()
        if pd.isna(largest) or int(largest) <= np.iinfo(np.int64).max:
            nullable = isinstance(values.dtype, pd.api.extensions.ExtensionDtype)
            frame[column] = values.astype("Int64" if nullable else np.int64)
    return frame


class QueryFailed(RuntimeError):
    """A query the backend refused or could not run: one line naming the backend."""


class ClickHouseConnection:
    """One open ClickHouse backend. `loader.frame` runs a named query through `frame`."""

    dialect = "clickhouse"

    def __init__(self, url: BackendUrl) -> None:
        self.url = url
        # chdb runs one query at a time per session; the dashboard calls from several threads.
        self._lock = threading.Lock()
        if url.scheme == "chdb":
            try:
                from chdb import session
            except ImportError:
                raise BackendError("chdb is not installed: pip install 'budgetscope[clickhouse]'"
                                   ) from None
            Path(url.path).mkdir(parents=True, exist_ok=True)
            self._session = session.Session(url.path)
            for name, value in SESSION_SETTINGS.items():  # names and values of our own
                self._session.query(f"SET {name} = {int(value)}")
            self._client = None
        else:
            try:
                import clickhouse_connect
            except ImportError:
                raise BackendError("clickhouse-connect is not installed: "
                                   "pip install 'budgetscope[clickhouse]'") from None
            self._session = None
            self._client = clickhouse_connect.get_client(
                host=url.host, port=url.port, username=url.user, password=url.password,
                database=url.database, settings=SESSION_SETTINGS)

    # -- running text ---------------------------------------------------------------------------
    def frame_text(self, text: str, parameters: Mapping[str, Any],
                   name: str = "a query") -> pd.DataFrame:
        """`text` run with its `parameters` bound: what `frame` and `scalar` run, and the tests'
        ad-hoc reads that no registered file holds (the system tables, a table's rows as
        stored). Every report and derivation of the product is a named query (`frame`)."""
        with self._lock, self._failing(name):
            if self._session is not None:
                params = {k: parameter_text(v) for k, v in parameters.items()}
                return self._session.query(text, "DataFrame", params=params or None)
            # clickhouse-connect escapes each value itself (its binding's escape_str).
            return self._client.query_df(text, parameters=dict(parameters) or None)

    def command(self, text: str, parameters: Mapping[str, Any] | None = None) -> None:
        with self._lock, self._failing("a statement"):
            if self._session is not None:
                params = {k: parameter_text(v) for k, v in (parameters or {}).items()}
                self._session.query(text, "CSV", params=params or None)
            else:
                self._client.command(text, parameters=dict(parameters or {}) or None)

    @contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """The engine's own error (chdb's, clickhouse-connect's: any class, several lines with
        the server's stack) as QueryFailed: one line naming the backend and what failed."""
        try:
            yield
        except QueryFailed:
            raise
        except Exception as error:  # noqa: BLE001 - every engine error becomes one line
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            first = lines[0] if lines else type(error).__name__
            raise QueryFailed(f"the {self.url.scheme} backend {self.url.describe()} could not "
                              f"run {what}: {first[:400]}") from error

    # -- named queries --------------------------------------------------------------------------
    def frame(self, query: Query, parameters: Mapping[str, Any]) -> pd.DataFrame:
        text = query.text.rstrip().rstrip(";")
        frame = self.frame_text(text, bound_parameters(query, parameters), query.name)
        return _signed_counts(frame.reset_index(drop=True))

    def run_script(self, name: str, parameters: Mapping[str, Any] | None = None) -> None:
        """Run every statement of a ClickHouse-only multi-statement file (DDL, derive), each
        with the `parameters` it names."""
        for number, statement in enumerate(split_statements(backend_queries()[name].text), 1):
            named = {m["name"] for m in CLICKHOUSE_PARAMETER.finditer(statement)}
            try:
                self.command(statement, {key: value for key, value in (parameters or {}).items()
                                         if key in named})
            except Exception as error:
                raise RuntimeError(f"{name}.sql statement {number} failed: {error}") from error

    def scalar(self, text: str) -> Any:
        frame = self.frame_text(text, {})
        return None if frame.empty else frame.iat[0, 0]

    def insert_arrow(self, table: str, data: pa.Table) -> None:
        """Append rows (columns named as the table's) to `table`, one of INSERTABLE_TABLES."""
        if table not in INSERTABLE_TABLES:
            raise ValueError(f"not a table budgetscope inserts into: {table!r}")
        names = data.schema.names
        if not all(_COLUMN_NAME.fullmatch(name) for name in names):
            raise ValueError(f"not column names: {names!r}")
        # Named, because a table may have more columns than the rows (otel_logs' TimestampTime
        # is filled by its DEFAULT).
        columns = ", ".join(f"`{name}`" for name in names)
        with self._lock:
            if self._session is not None:
                # chdb's Python() table function reads the local variable named in the text.
                rows = data  # noqa: F841
                self._session.query(f"INSERT INTO {table} ({columns}) SELECT * FROM Python(rows)")
            else:
                self._client.insert_arrow(table, data)

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
            elif self._client is not None:
                self._client.close()
                self._client = None


class NoTraces(LookupError):
    """The backend has no otel_traces table: the Collector's exporter has not written yet."""


def derived_state(con: ClickHouseConnection) -> dict[str, Any] | None:
    """otel_traces now against what the last derivation read (derive_state.sql), or None when
    nothing was derived yet. Raises NoTraces when there is no otel_traces table."""
    if con.scalar("EXISTS TABLE otel_traces") != 1:
        raise NoTraces(f"{con.url.describe()} has no otel_traces table: point the Collector's "
                       "ClickHouse exporter at it first")
    # the price tables, and the bundled table's version recorded (a new one forgets the
    # matches, which the comparison below then sees)
    prices.prepare(con)
    if con.scalar("EXISTS TABLE budgetscope_derive_state") != 1 or \
            con.scalar("EXISTS TABLE budgetscope_declared_budgets") != 1 or \
            con.scalar("SELECT count() FROM system.columns WHERE database = currentDatabase() "
                       "AND table = 'budgetscope_derive_state' AND name = 'prices'") != 1:
        # never derived, or derived before declared budgets (docs/guide.md#declaring-budgets), log
        # records or prices (docs/metrics.md §11) existed
        return None
    rows = con.frame(backend_queries()["derive_state"], {})
    if rows.empty:
        return None
    state = rows.iloc[0].to_dict()
    state["log_rows"] = _otel_logs_rows(con)
    return state


def _otel_logs_rows(con: ClickHouseConnection) -> int:
    """Rows in the Collector's otel_logs; 0 when it has none (no logs pipeline)."""
    if con.scalar("EXISTS TABLE otel_logs") != 1:
        return 0
    return int(con.scalar("SELECT count() FROM otel_logs") or 0)


def _due(con: ClickHouseConnection, state: Mapping[str, Any] | None) -> str | None:
    """What `state` (derived_state's) asks of the derived tables: "build", "remeasure" or
    None (current)."""
    if state is None or int(state["spans"]) != int(state["derived_spans"]) or \
            pd.Timestamp(state["newest_span"]) != pd.Timestamp(state["derived_newest_span"]) or \
            int(state["log_rows"]) != int(state["derived_log_rows"]):
        return "build"
    if state["declared"] == state["derived_declared"] and \
            state["prices"] == state["derived_prices"]:
        return None
    # only the declarations or the prices changed: what depends on them is measured again,
    # unless the derivation was stored before what a re-measure reads was kept with it
    if all(con.scalar(f"EXISTS TABLE {name}") == 1 for name in REMEASURE_READS):
        return "remeasure"
    return "build"


def derivation_due(con: ClickHouseConnection) -> str | None:
    """What the next reader's ensure_derived will do: "build" (otel_traces or otel_logs
    changed, or nothing was derived), "remeasure" (only the declarations or the prices
    changed) or None (the derived tables are current)."""
    return _due(con, derived_state(con))


def ensure_derived(con: ClickHouseConnection, *, force: bool = False) -> bool:
    """Build the derived tables (derive_build.sql) when they are missing or otel_traces or
    otel_logs changed since they were built, or measure the stored ones again
    (derive_remeasure.sql) when only the declarations or the prices changed; returns whether
    it did either. Readers call this before querying, so every report covers every stored
    span. A build reads the whole table: on a cluster, run it from one place (one dashboard,
    or `budgetscope report` from cron) rather than from each."""
    return update_derived(con, force=force) is not None


def update_derived(con: ClickHouseConnection, *, force: bool = False) -> str | None:
    """ensure_derived, saying what it did: "build", "remeasure" or None (they were current),
    for a command that tells its user (`budgets` and `prices` on the backend)."""
    state = derived_state(con)
    due = "build" if force else _due(con, state)
    if due is None:
        return None
    if due == "remeasure" and state is not None:
        _remeasure(con, state)
        return due
    con.run_script("derive_scratch_drop")  # what a crashed build may have left
    try:
        # exception log records (docs/conventions.md) from otel_logs, when a logs pipeline made one
        con.run_script("derive_log_exceptions" if con.scalar("EXISTS TABLE otel_logs") == 1
                       else "derive_log_exceptions_none")
        # docs/conventions.md: a trace without its root is measured once its last span ended longer
        # ago than the grace period (otel_traces keeps no arrival time)
        cutoff = {"root_cutoff_ns": time.time_ns() - int(ROOT_GRACE_SECONDS * 1e9)}
        for name in DERIVE_BUILD:
            if name == MATCH_PRICES_BEFORE:
                prices.match_new_pairs(con)
            con.run_script(name, cutoff)
    finally:
        con.run_script("derive_scratch_drop")
    return "build"


def _remeasure(con: ClickHouseConnection, state: Mapping[str, Any]) -> None:
    """The stored runs, steps and metered spans measured again against the declarations and
    prices now; the derive state records their fingerprints as `state` read them (a change
    made meanwhile is measured again at the next read)."""
    con.run_script("derive_scratch_drop")  # what a crashed build may have left
    try:
        for name in DERIVE_REMEASURE:
            if name == MATCH_PRICES_BEFORE:
                prices.match_new_pairs(con)  # a new bundled table forgot the matches
            con.run_script(name, {"declared": state["declared"], "prices": state["prices"]})
    finally:
        con.run_script("derive_scratch_drop")


_open: dict[BackendUrl, ClickHouseConnection] = {}
_open_lock = threading.Lock()


def connect(url: str | BackendUrl) -> ClickHouseConnection:
    """A connection for this URL, shared within the process: chdb allows one data folder per
    process at a time, and a server client is reusable."""
    parsed = parse_backend_url(url) if isinstance(url, str) else url
    with _open_lock:
        con = _open.get(parsed)
        if con is None or (con._session is None and con._client is None):
            con = _open[parsed] = ClickHouseConnection(parsed)
        return con


def close_all() -> None:
    with _open_lock:
        for con in _open.values():
            con.close()
        _open.clear()
