"""The reports' .sql files of queries/sql/, loaded once at import (store/file/sql_files.py: a
header per file, the folder's set equal to the registered names, parameters always bound).

A query may compose a named fragment of sql/fragments/ (queries/fragments.py), such as the run
filter, written once for every query that filters runs.

The ClickHouse dialect (CLICKHOUSE_QUERIES) of a report query is translated from its DuckDB file
(queries/translate.py); sql/clickhouse/ holds only the few overrides listed in
translate.OVERRIDES, checked the same way as this folder. Their parameters are ClickHouse query
parameters (`{since_ns:Nullable(Int64)}`). `frame` runs a named query in the dialect of the
connection it is given. The derivation's files, and the ClickHouse backend's own tables and
derivation, are the store's (store/derive/statements.py, store/clickhouse/).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import duckdb
import pandas as pd

from queries import fragments, translate
from store import (
    CLICKHOUSE_PARAMETER,
    DUCKDB_PARAMETER,
    Query,
    QueryFileError,
    bound_parameters,
)
from store import load_queries as load_sql_folder

SQL_FOLDER = Path(__file__).with_name("sql")

QUERY_NAMES = frozenset({
    "runs_report", "attribution_report", "attribution_summary", "failures_report",
    "utilisation_report", "utilisation_histogram", "step_utilisation",
    "reconciliation_report", "reconciliation_by_period", "weekly_report",
    "run_summary", "run_candidates", "runs_by_prefix", "run_steps", "run_span_details",
    "run_writes", "run_log_records", "trace_waiting",
    "database_status", "failures_daily", "tool_latency", "attribution_completed",
    "orphan_writes", "headline",
    "simulation_runs", "simulation_steps", "runs_by_agent", "runs_with_steps",
    "runs_with_writes", "step_keys", "run_ids",
    "cost_report", "cost_attribution_report", "cost_attribution_summary", "models_report",
    "run_step_costs", "pricing_coverage", "run_spend",
})

CLICKHOUSE_FOLDER = SQL_FOLDER / "clickhouse"
# The queries the ClickHouse backend runs (same names, same columns): translated from the DuckDB
# file (queries/translate.py), or, for the few in translate.OVERRIDES, hand-written here.
CLICKHOUSE_QUERY_NAMES = QUERY_NAMES
CLICKHOUSE_FILE_NAMES = frozenset(translate.OVERRIDES)

_CLICKHOUSE_PARAMETER = CLICKHOUSE_PARAMETER


def load_queries(folder: Path = SQL_FOLDER, expected: frozenset[str] = QUERY_NAMES,
                 parameter: re.Pattern[str] = DUCKDB_PARAMETER) -> dict[str, Query]:
    return load_sql_folder(folder, expected, parameter)


def _parameters(text: str, parameter: re.Pattern[str]) -> frozenset[str]:
    code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())  # not comments
    return frozenset(m["name"] for m in parameter.finditer(code))


def _composed(queries: dict[str, Query]) -> dict[str, Query]:
    """Each query with its fragments composed in; a fragment brings its own parameters."""
    out = {}
    for name, query in queries.items():
        text = fragments.compose(query.text)
        out[name] = replace(query, text=text, parameters=_parameters(
            text, DUCKDB_PARAMETER)) if text != query.text else query
    return out


QUERIES = _composed(load_queries())


class _ClickHouseQueries(Mapping[str, Query]):
    """Every ClickHouse report query by name: the overrides of sql/clickhouse/ as read at
    import, and the translations of the DuckDB files, each made on its first use and kept for
    the process (DuckDB-only processes never import sqlglot)."""

    def __init__(self, files: dict[str, Query], duckdb: dict[str, Query]) -> None:
        self._files = files
        self._duckdb = duckdb
        self._translated: dict[str, Query] = {}

    def __getitem__(self, name: str) -> Query:
        if name in self._files:
            return self._files[name]
        query = self._translated.get(name)
        if query is None:
            source = self._duckdb[name]
            text = translate.translate(source.text)
            parameters = _parameters(text, _CLICKHOUSE_PARAMETER)
            if parameters != source.parameters:  # a parameter lost or made up on the way
                raise QueryFileError(f"{name}: translation binds {sorted(parameters)}, the "
                                     f"DuckDB file {sorted(source.parameters)}")
            query = self._translated[name] = Query(name, source.doc, text, parameters)
        return query

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(CLICKHOUSE_QUERY_NAMES))

    def __len__(self) -> int:
        return len(CLICKHOUSE_QUERY_NAMES)


CLICKHOUSE_QUERIES: Mapping[str, Query] = _ClickHouseQueries(
    load_queries(CLICKHOUSE_FOLDER, CLICKHOUSE_FILE_NAMES, _CLICKHOUSE_PARAMETER), QUERIES)


class DialectConnection(Protocol):
    """A connection of another dialect than DuckDB (store.clickhouse.ClickHouseConnection)."""

    dialect: str

    def frame(self, query: Query, parameters: Mapping[str, Any]) -> pd.DataFrame: ...


Connection = duckdb.DuckDBPyConnection | DialectConnection


class TooManyRows(RuntimeError):
    """A query returned more rows than the caller's budget (`rows_at_most`)."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(f"{name} holds more than {limit:,} rows")
        self.name, self.limit = name, limit


_row_budget: ContextVar[int | None] = ContextVar("_row_budget", default=None)


@contextmanager
def rows_at_most(limit: int) -> Iterator[None]:
    """Within this block (in this thread), a query that would return more than `limit` rows
    raises TooManyRows after fetching at most about `limit` of them into memory: what the
    server's read API runs for a client is bounded by this, not by the size of the file."""
    token = _row_budget.set(limit)
    try:
        yield
    finally:
        _row_budget.reset(token)


def frame(con: Connection, name: str,
          parameters: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Query `name` as a DataFrame, in the dialect of `con` (within the row budget of
    `rows_at_most`, when one is set)."""
    if getattr(con, "dialect", "duckdb") == "clickhouse":
        return con.frame(CLICKHOUSE_QUERIES[name], parameters or {})  # type: ignore[union-attr]
    result = execute(con, name, parameters)  # type: ignore[arg-type]
    limit = _row_budget.get()
    if limit is None:
        return result.df()
    # One chunk of DuckDB's vectors (2,048 rows each) holding the budget: the same frame as
    # .df() (same conversion, same dtypes), and one more vector says whether rows are left.
    rows = result.fetch_df_chunk(limit // _VECTOR_ROWS + 1)
    if len(rows) > limit or len(result.fetch_df_chunk(1)):
        raise TooManyRows(name, limit)
    return rows


_VECTOR_ROWS = 2048


def frames(con: Connection, name: str, parameters: Mapping[str, Any] | None = None, *,
           vectors: int = 1) -> Iterator[pd.DataFrame]:
    """Query `name` in pieces, as DuckDB hands its result over: `vectors` of its 2,048-row
    vectors at a time, each converted as `frame` converts the whole (the same dtypes, so the
    same cells), the first piece there even without rows (it carries the columns). For what
    is written out as it is read (a report streamed by the read API, or to a file): memory
    is a piece, whatever the result's size, so no row budget applies. Another dialect: the
    whole frame, as one piece."""
    if getattr(con, "dialect", "duckdb") == "clickhouse":
        yield frame(con, name, parameters)
        return
    result = execute(con, name, parameters)  # type: ignore[arg-type]
    piece = result.fetch_df_chunk(vectors)
    yield piece
    while len(piece):
        piece = result.fetch_df_chunk(vectors)
        if len(piece):
            yield piece


def arrow_frame(con: Connection, name: str,
                parameters: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Query `name` as a DataFrame whose columns are Arrow arrays (pd.ArrowDtype), for a
    large read that only goes on to numpy: the same rows and values as `frame`, NULL kept as
    NA, without the per-value conversion to pandas' own dtypes. DuckDB hands its result over
    as Arrow with Python's lock released; `frame` builds each string as a Python object with
    it held. Measured on the replay's 586k steps: 0.11 s here, 0.24-0.30 s through `frame`,
    and a thread beside the read (the server answering the browser) waited up to 0.27 s at a
    time there, 5 ms here. Another dialect, or a row budget (`rows_at_most`), reads through
    `frame`."""
    if getattr(con, "dialect", "duckdb") == "clickhouse" or _row_budget.get() is not None:
        return frame(con, name, parameters)
    query = QUERIES[name]
    relation = con.sql(query.text,  # type: ignore[union-attr]
                       params=bound_parameters(query, parameters) or None)
    return relation.to_arrow_table().to_pandas(types_mapper=pd.ArrowDtype)


def execute(con: duckdb.DuckDBPyConnection, name: str,
            parameters: Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """Run query `name`, binding the parameters it uses from `parameters` (extra ones, such as
    a filter a query does not apply, are left out; a missing one is an error)."""
    query = QUERIES[name]
    bound = bound_parameters(query, parameters)
    if not query.parameters:
        return con.execute(query.text)
    return con.execute(query.text, bound)


__all__ = ["CLICKHOUSE_PARAMETER", "CLICKHOUSE_QUERIES", "CLICKHOUSE_QUERY_NAMES", "QUERIES",
           "QUERY_NAMES", "SQL_FOLDER", "Connection", "DialectConnection", "Query",
           "QueryFileError", "TooManyRows", "arrow_frame", "bound_parameters", "execute", "frame",
           "frames", "load_queries", "rows_at_most"]
