"""Declared budgets and step caps on the ClickHouse backend (docs/guide.md#declaring-budgets).

The same declarations as the DuckDB file's (store/declared/budgets.py checks them), kept in
ClickHouse tables that derive_build.sql reads. The derived tables there are rebuilt whole, not
per trace: a change alters the declarations' fingerprint that derive_state.sql compares, so the
next reader (this command itself, right after the change) rebuilds them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from store.clickhouse import BACKEND_FOLDER, ClickHouseConnection, split_statements
from store.declared.budgets import Change, Declaration, DeclarationError
from store.file.sql_files import CLICKHOUSE_PARAMETER, load_queries

QUERIES = load_queries(BACKEND_FOLDER / "declared", frozenset({
    "declared_tables", "declared_budget_delete", "declared_budget_insert",
    "declared_cap_delete", "declared_cap_insert", "declared_list"}), CLICKHOUSE_PARAMETER)


@dataclass(frozen=True)
class Stored:
    change: Change
    changed: bool


def _run(con: ClickHouseConnection, name: str, parameters: dict[str, object] | None = None
         ) -> None:
    """Each statement of a file, comments removed (chdb's parser trips on a quote in one)."""
    for statement in split_statements(QUERIES[name].text):
        con.command(statement, parameters)


def _tables(con: ClickHouseConnection) -> None:
    _run(con, "declared_tables")


def declarations(con: ClickHouseConnection) -> list[Declaration]:
    _tables(con)
    frame = con.frame(QUERIES["declared_list"], {})
    return [Declaration(row.what, row.scope, None if pd.isna(row.target) else row.target,
                        int(row.duration_ms), str(row.declared_at))
            for row in frame.itertuples()]


def apply(con: ClickHouseConnection, change: Change) -> Stored:
    """Store a checked change (ClickHouse has no transactions: a delete, then an insert)."""
    change = change.checked()
    unset = change.action in ("unset", "unset_default")
    if (change.action in ("set", "set_default") and change.declared != ("time",)) or (
            unset and change.dimensions not in ((), ("time",))):
        # docs/metrics.md §11: the ClickHouse derivation does not measure tokens and dollars yet
        raise DeclarationError("on the ClickHouse backend a budget is a duration only: token "
                               "and dollar budgets are declared on a DuckDB file")
    _tables(con)
    before = {(d.scope, d.target): d.duration_ms for d in declarations(con)}
    if change.action in ("cap", "uncap"):
        key, params = ("step", change.target), {"step_key": change.target}
        _run(con, "declared_cap_delete", params)
        if change.action == "cap":
            _run(con, "declared_cap_insert", {**params, "cap_ms": change.duration_ms})
    else:
        scope = "agent" if change.action in ("set", "unset") else "default"
        key = (scope, change.target)
        params = {"scope": scope, "agent": change.target or ""}
        _run(con, "declared_budget_delete", params)
        if change.action in ("set", "set_default"):
            _run(con, "declared_budget_insert", {**params, "budget_ms": change.duration_ms})
    return Stored(change, before.get(key) != change.duration_ms)
