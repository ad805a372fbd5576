"""Declared budgets and step caps on the ClickHouse backend (docs/guide.md#declaring-budgets,
docs/metrics.md §11.5).

The same declarations as the DuckDB file's (store/declared/budgets.py checks them): a budget's
duration, token count, dollars per run and dollars per week, each set and removed on its own,
kept in ClickHouse tables that derive_budgeted.sql and derive_cost.sql read. The derived tables
there are measured again whole, not per trace: a change alters the declarations' fingerprint
that derive_state.sql compares, so the next reader (this command itself, right after the
change) re-measures them from the stored runs and steps (derive_remeasure.sql).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from store.clickhouse import BACKEND_FOLDER, ClickHouseConnection, split_statements
from store.declared.budgets import DIMENSIONS, Change, Declaration
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
                        _number(row.duration_ms), str(row.declared_at), _number(row.tokens),
                        _number(row.usd_nano), _number(row.usd_per_week_nano))
            for row in frame.itertuples()]


def _number(value: object) -> int | None:
    return None if pd.isna(value) else int(value)  # type: ignore[arg-type]


# A budget's dimensions in the order of DIMENSIONS, as Declaration and Change name them.
_FIELDS = ("duration_ms", "tokens", "usd_nano", "usd_per_week_nano")


def apply(con: ClickHouseConnection, change: Change) -> Stored:
    """Store a checked change (ClickHouse has no transactions: a delete, then an insert). A set
    declares the dimensions it gives and keeps the others; an unset removes those it names
    (docs/metrics.md §10, §11.5), and the declaration once none is left."""
    change = change.checked()
    _tables(con)
    if change.action in ("cap", "uncap"):
        before = {d.target: d.duration_ms for d in declarations(con) if d.what == "cap"}
        params = {"step_key": change.target}
        _run(con, "declared_cap_delete", params)
        if change.action == "cap":
            _run(con, "declared_cap_insert", {**params, "cap_ms": change.duration_ms})
        return Stored(change, before.get(change.target) != change.duration_ms)
    scope = "agent" if change.action in ("set", "unset") else "default"
    current = next((d for d in declarations(con) if d.what == "budget" and d.scope == scope
                    and d.target == change.target), None)
    before = tuple(getattr(current, name) for name in _FIELDS) if current else (None,) * 4
    if change.action in ("set", "set_default"):
        after = tuple(getattr(change, name) if getattr(change, name) is not None else old
                      for name, old in zip(_FIELDS, before, strict=True))
    else:
        after = tuple(None if dimension in change.removed else old
                      for dimension, old in zip(DIMENSIONS, before, strict=True))
    if after == before:
        return Stored(change, False)
    params = {"scope": scope, "agent": change.target or ""}
    _run(con, "declared_budget_delete", params)
    if any(value is not None for value in after):
        _run(con, "declared_budget_insert", {
            **params, **dict(zip(("budget_ms", "tokens", "usd_nano", "usd_per_week_nano"),
                                 after, strict=True))})
    return Stored(change, True)
