"""The reports' .sql files of queries/sql/, loaded once at import (store.sql_files: a header
per file, the folder's set equal to the registered names, parameters always bound).

A second dialect lives in sql/clickhouse/ (CLICKHOUSE_QUERY_NAMES, checked the same way): a file
there carries the same name and the same output columns as the DuckDB file it translates, so
each analysis keeps one definition in at most two dialects. Its parameters are ClickHouse query
parameters (`{since_ns:Nullable(Int64)}`). `frame` runs a named query in the dialect of the
connection it is given. The derivation's files, and the ClickHouse backend's own tables and
derivation, are the store's (store/derive.py, store/clickhouse.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import duckdb
import pandas as pd

from store import sql_files as store_sql
from store.sql_files import Query, QueryFileError, bound_parameters

SQL_FOLDER = Path(__file__).with_name("sql")

QUERY_NAMES = frozenset({
    "runs_report", "attribution_report", "attribution_summary", "failures_report",
    "utilisation_report", "utilisation_histogram", "step_utilisation",
    "reconciliation_report", "reconciliation_by_period", "weekly_report",
    "run_summary", "run_candidates", "run_steps", "run_writes", "run_log_records",
    "database_status", "failures_daily", "tool_latency", "attribution_completed",
    "orphan_writes", "headline",
    "simulation_runs", "simulation_steps", "runs_by_agent", "runs_with_steps",
})

CLICKHOUSE_FOLDER = SQL_FOLDER / "clickhouse"
# The DuckDB queries the ClickHouse backend translates (same names, same columns).
CLICKHOUSE_QUERY_NAMES = frozenset({
    "runs_report", "attribution_report", "attribution_summary", "failures_report",
    "utilisation_report", "utilisation_histogram", "step_utilisation",
    "reconciliation_report", "reconciliation_by_period", "weekly_report",
    "run_summary", "run_candidates", "run_steps", "run_writes", "run_log_records",
    "database_status", "failures_daily", "tool_latency", "attribution_completed",
    "orphan_writes", "runs_by_agent", "headline", "simulation_runs", "simulation_steps",
    "runs_with_steps",
})

CLICKHOUSE_PARAMETER = _CLICKHOUSE_PARAMETER = store_sql.CLICKHOUSE_PARAMETER


def load_queries(folder: Path = SQL_FOLDER, expected: frozenset[str] = QUERY_NAMES,
                 parameter: re.Pattern[str] = store_sql.DUCKDB_PARAMETER) -> dict[str, Query]:
    return store_sql.load_queries(folder, expected, parameter)


QUERIES = load_queries()
CLICKHOUSE_QUERIES = load_queries(CLICKHOUSE_FOLDER, CLICKHOUSE_QUERY_NAMES,
                                  _CLICKHOUSE_PARAMETER)


class DialectConnection(Protocol):
    """A connection of another dialect than DuckDB (store.clickhouse.ClickHouseConnection)."""

    dialect: str

    def frame(self, query: Query, parameters: Mapping[str, Any]) -> pd.DataFrame: ...


Connection = duckdb.DuckDBPyConnection | DialectConnection


def frame(con: Connection, name: str,
          parameters: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Query `name` as a DataFrame, in the dialect of `con`."""
    if getattr(con, "dialect", "duckdb") == "clickhouse":
        return con.frame(CLICKHOUSE_QUERIES[name], parameters or {})  # type: ignore[union-attr]
    return execute(con, name, parameters).df()  # type: ignore[arg-type]


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
           "QueryFileError", "bound_parameters", "execute", "frame", "load_queries"]
