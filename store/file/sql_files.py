"""SQL kept in .sql files, loaded once at import and run with bound parameters.

Every file starts with `-- name: <its file stem>` and a one-line `-- ` docstring. A folder's set
of files must equal the names its owner registers: a file nobody registered, or a registered
one that is missing, stops the program at start-up instead of failing at the first query that
needs it. DuckDB parameters are named (`$since_ns`), ClickHouse ones typed
(`{since_ns:Nullable(Int64)}`); values are always bound, never formatted into the text, so a
query's text is fixed at start-up.

Every .sql file of the store is loaded here, each folder by the module that owns it: the DDL and
its migrations (file/ddl.py), the writer's (write/writer.py), the derivation's and its pending
marks' (derive/statements.py, derive/pending.py), retention's (retention/passes.py), the declared
budgets' (declared/budgets.py) and the ClickHouse backend's (clickhouse/); the reports'
(queries/loader.py) are loaded the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A name is its file's stem: lowercase words, digits and underscores (a migration's `1_to_2`).
_NAME_LINE = re.compile(r"^-- name: (?P<name>[a-z0-9_]+)\s*$")
_DOC_LINE = re.compile(r"^-- (?P<doc>\S.*)$")
DUCKDB_PARAMETER = re.compile(r"\$(?P<name>[a-z_][a-z0-9_]*)")
CLICKHOUSE_PARAMETER = re.compile(r"\{(?P<name>[a-z_][a-z0-9_]*):")


class QueryFileError(RuntimeError):
    """A SQL folder does not match its registered names, or a file lacks its header."""


@dataclass(frozen=True)
class Query:
    name: str
    doc: str
    text: str
    parameters: frozenset[str]


def parse_query(path: Path, parameter: re.Pattern[str] = DUCKDB_PARAMETER) -> Query:
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


# Every folder loaded in this process, so that a test can tell that no folder of .sql files is
# read around the registry (tests/store/test_sql_registry.py).
LOADED_FOLDERS: set[Path] = set()


def load_queries(folder: Path, expected: frozenset[str],
                 parameter: re.Pattern[str] = DUCKDB_PARAMETER) -> dict[str, Query]:
    present = {path.stem: path for path in folder.glob("*.sql")}
    unknown = sorted(set(present) - expected)
    missing = sorted(expected - set(present))
    if unknown or missing:
        raise QueryFileError(f"{folder} does not match QUERY_NAMES: unknown {unknown}, "
                             f"missing {missing}")
    LOADED_FOLDERS.add(folder.resolve())
    return {name: parse_query(path, parameter) for name, path in sorted(present.items())}


def bound_parameters(query: Query, parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parameters `query` uses, taken from `parameters` (extra ones are left out; a missing
    one is an error)."""
    given = dict(parameters or {})
    missing = sorted(query.parameters - set(given))
    if missing:
        raise KeyError(f"query {query.name} needs parameters {missing}")
    return {key: given[key] for key in query.parameters}


def split_statements(text: str) -> list[str]:
    """The statements of a multi-statement file: each ends with ';' at the end of a line."""
    code = "\n".join(line.split("--", 1)[0].rstrip() for line in text.splitlines())
    statements, current = [], []
    for line in code.splitlines():
        current.append(line)
        if line.endswith(";"):
            statements.append("\n".join(current).rstrip(";").strip())
            current = []
    rest = "\n".join(current).strip()
    if rest:
        statements.append(rest)
    return [s for s in statements if s]
