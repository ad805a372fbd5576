"""Loads the .sql files of queries/sql/ once, at import, and runs them with bound parameters.

Every file starts with `-- name: <its file stem>` and a one-line `-- ` docstring. The set of
files must equal QUERY_NAMES: a file nobody registered, or a registered one that is missing,
stops the program at start-up instead of failing at the first report that needs it.
Parameters are DuckDB named parameters (`$since_ns`); values are always bound, never formatted
into the text, so a query's text is fixed at start-up.

A second dialect lives in sql/clickhouse/ (CLICKHOUSE_QUERY_NAMES, checked the same way): a file
there carries the same name and the same output columns as the DuckDB file it translates, so
each analysis keeps one definition in at most two dialects. Its parameters are ClickHouse query
parameters (`{since_ns:Nullable(Int64)}`). `frame` runs a named query in the dialect of the
connection it is given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import duckdb
import pandas as pd

from queries import conventions

SQL_FOLDER = Path(__file__).with_name("sql")

QUERY_NAMES = frozenset({
    "derive_refresh", "derive_rebuild_prepare",
    "runs_report", "attribution_report", "attribution_summary", "failures_report",
    "utilisation_report", "utilisation_histogram", "step_utilisation",
    "reconciliation_report", "reconciliation_by_period", "weekly_report",
    "run_summary", "run_candidates", "run_steps", "run_writes", "run_log_records",
    "database_status", "failures_daily", "tool_latency", "attribution_completed",
    "orphan_writes", "headline",
    "simulation_runs", "simulation_steps", "runs_by_agent", "runs_with_steps",
})

CLICKHOUSE_FOLDER = SQL_FOLDER / "clickhouse"
# The DuckDB queries the ClickHouse backend translates (same names, same columns), and the
# ClickHouse-only files: the exporter's table, and the derivation that builds runs and steps.
CLICKHOUSE_QUERY_NAMES = frozenset({
    "runs_report", "attribution_report", "attribution_summary", "failures_report",
    "utilisation_report", "utilisation_histogram", "step_utilisation",
    "reconciliation_report", "reconciliation_by_period", "weekly_report",
    "run_summary", "run_candidates", "run_steps", "run_writes", "run_log_records",
    "database_status", "failures_daily", "tool_latency", "attribution_completed",
    "orphan_writes", "runs_by_agent", "headline", "simulation_runs", "simulation_steps",
    "runs_with_steps",
    "otel_traces_table", "otel_logs_table", "derive_build",
    "derive_log_exceptions", "derive_log_exceptions_none", "derive_scratch_drop", "derive_state",
})

_NAME_LINE = re.compile(r"^-- name: (?P<name>[a-z_][a-z0-9_]*)\s*$")
_DOC_LINE = re.compile(r"^-- (?P<doc>\S.*)$")
_PARAMETER = re.compile(r"\$(?P<name>[a-z_][a-z0-9_]*)")
_CLICKHOUSE_PARAMETER = re.compile(r"\{(?P<name>[a-z_][a-z0-9_]*):")
CLICKHOUSE_PARAMETER = _CLICKHOUSE_PARAMETER  # for ClickHouse files loaded elsewhere


class QueryFileError(RuntimeError):
    """The SQL folder does not match QUERY_NAMES, or a file lacks its header."""


@dataclass(frozen=True)
class Query:
    name: str
    doc: str
    text: str
    parameters: frozenset[str]


def parse_query(path: Path, parameter: re.Pattern[str] = _PARAMETER) -> Query:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    name = _NAME_LINE.match(lines[0]) if lines else None
    doc = _DOC_LINE.match(lines[1]) if len(lines) > 1 else None
    if name is None or doc is None:
        raise QueryFileError(f"{path.name}: must start with '-- name: {path.stem}' and a "
                             "one-line '-- docstring'")
    if name["name"] != path.stem:
        raise QueryFileError(f"{path.name}: names itself {name['name']!r}, expected "
                             f"{path.stem!r}")
    code = "\n".join(line.split("--", 1)[0] for line in lines)  # parameters outside comments
    parameters = frozenset(m["name"] for m in parameter.finditer(code))
    return Query(path.stem, doc["doc"], text, parameters)


def load_queries(folder: Path = SQL_FOLDER, expected: frozenset[str] = QUERY_NAMES,
                 parameter: re.Pattern[str] = _PARAMETER) -> dict[str, Query]:
    present = {path.stem: path for path in folder.glob("*.sql")}
    unknown = sorted(set(present) - expected)
    missing = sorted(expected - set(present))
    if unknown or missing:
        raise QueryFileError(f"{folder} does not match QUERY_NAMES: unknown {unknown}, "
                             f"missing {missing}")
    return {name: parse_query(path, parameter) for name, path in sorted(present.items())}


def _with_conventions(queries: dict[str, Query], dialect: str) -> dict[str, Query]:
    """The derivations' `/*@name*/` markers filled from queries/conventions.py (SPEC §9, §3)."""
    return {name: replace(query, text=conventions.render(query.text, dialect))
            if "/*@" in query.text else query for name, query in queries.items()}


QUERIES = _with_conventions(load_queries(), "duckdb")
CLICKHOUSE_QUERIES = _with_conventions(
    load_queries(CLICKHOUSE_FOLDER, CLICKHOUSE_QUERY_NAMES, _CLICKHOUSE_PARAMETER), "clickhouse")


def bound_parameters(query: Query, parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parameters `query` uses, taken from `parameters` (extra ones are left out; a missing
    one is an error)."""
    given = dict(parameters or {})
    missing = sorted(query.parameters - set(given))
    if missing:
        raise KeyError(f"query {query.name} needs parameters {missing}")
    return {key: given[key] for key in query.parameters}


class DialectConnection(Protocol):
    """A connection of another dialect than DuckDB (queries.clickhouse.ClickHouseConnection)."""

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
