"""Loads the .sql files of queries/sql/ once, at import, and runs them with bound parameters.

Every file starts with `-- name: <its file stem>` and a one-line `-- ` docstring. The set of
files must equal QUERY_NAMES: a file nobody registered, or a registered one that is missing,
stops the program at start-up instead of failing at the first report that needs it.
Parameters are DuckDB named parameters (`$since_ns`); values are always bound, never formatted
into the text, so a query's text is fixed at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

SQL_FOLDER = Path(__file__).with_name("sql")

QUERY_NAMES = frozenset({
    "derive_refresh", "derive_rebuild_prepare",
    "runs_report", "attribution_report", "attribution_summary", "failures_report",
    "utilisation_report", "utilisation_histogram", "step_utilisation",
    "reconciliation_report", "reconciliation_by_period", "weekly_report",
    "run_summary", "run_candidates", "run_steps", "run_writes",
    "database_status", "failures_daily", "tool_latency", "attribution_completed",
    "orphan_writes", "recent_signals",
    "simulation_runs", "simulation_steps",
})

_NAME_LINE = re.compile(r"^-- name: (?P<name>[a-z_][a-z0-9_]*)\s*$")
_DOC_LINE = re.compile(r"^-- (?P<doc>\S.*)$")
_PARAMETER = re.compile(r"\$(?P<name>[a-z_][a-z0-9_]*)")


class QueryFileError(RuntimeError):
    """The SQL folder does not match QUERY_NAMES, or a file lacks its header."""


@dataclass(frozen=True)
class Query:
    name: str
    doc: str
    text: str
    parameters: frozenset[str]


def parse_query(path: Path) -> Query:
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
    parameters = frozenset(m["name"] for m in _PARAMETER.finditer(code))
    return Query(path.stem, doc["doc"], text, parameters)


def load_queries(folder: Path = SQL_FOLDER,
                 expected: frozenset[str] = QUERY_NAMES) -> dict[str, Query]:
    present = {path.stem: path for path in folder.glob("*.sql")}
    unknown = sorted(set(present) - expected)
    missing = sorted(expected - set(present))
    if unknown or missing:
        raise QueryFileError(f"{folder} does not match QUERY_NAMES: unknown {unknown}, "
                             f"missing {missing}")
    return {name: parse_query(path) for name, path in sorted(present.items())}


QUERIES = load_queries()


def execute(con: duckdb.DuckDBPyConnection, name: str,
            parameters: Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """Run query `name`, binding the parameters it uses from `parameters` (extra ones, such as
    a filter a query does not apply, are left out; a missing one is an error)."""
    query = QUERIES[name]
    given = dict(parameters or {})
    missing = sorted(query.parameters - set(given))
    if missing:
        raise KeyError(f"query {name} needs parameters {missing}")
    if not query.parameters:
        return con.execute(query.text)
    return con.execute(query.text, {key: given[key] for key in query.parameters})
