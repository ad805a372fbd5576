"""Keeps the derived runs and steps tables in step with spans (SPEC §1-§6) and with the declared
budgets (SPEC §10).

`refresh_touched` recomputes only the traces in the temp table touched_traces, from all their
stored spans: derive_refresh.sql recognises the steps and classes, derive_measure.sql applies
B. `remeasure_touched` runs only the second half, over the stored runs and steps
(derive_budgets.sql): what a change of a declared budget or cap moves. PendingDerivations in
store/derivation.py calls them; store/scheduling.py says when. The derivation's SQL is in
store/sql_derive/, its `/*@name*/` markers filled from store/conventions.py (SPEC §9, §3)
once, at import.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import duckdb

from store import conventions
from store.sql_files import Query, load_queries

DERIVE_FOLDER = Path(__file__).with_name("sql_derive")
# The recognition, in order (derive_refresh.sql says why the walk runs twice).
RECOGNISE = ("derive_refresh", "derive_walk", "derive_recognise", "derive_walk", "derive_steps")
DERIVE_NAMES = frozenset({*RECOGNISE, "derive_measure", "derive_budgets", "derive_drop",
                          "derive_rebuild_prepare", "derive_explain"})


def with_conventions(queries: dict[str, Query], dialect: str) -> dict[str, Query]:
    """The derivations' `/*@name*/` markers filled from store/conventions.py (SPEC §9, §3)."""
    return {name: replace(query, text=conventions.render(query.text, dialect))
            if "/*@" in query.text else query for name, query in queries.items()}


QUERIES = with_conventions(load_queries(DERIVE_FOLDER, DERIVE_NAMES), "duckdb")


def _execute(con: duckdb.DuckDBPyConnection, name: str) -> None:
    con.execute(QUERIES[name].text)


def refresh_touched(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute runs and steps of the traces listed in the temp table touched_traces."""
    for name in RECOGNISE:
        _execute(con, name)
    _execute(con, "derive_measure")
    _execute(con, "derive_drop")


# SPEC §9, "A trace without its root": the derivation measures a trace whose root never arrived
# once none of its spans was stored after this instant (a connection's setting; unset, none).
ROOT_CUTOFF_VARIABLE = "budgetscope_root_cutoff"


def set_root_cutoff(con: duckdb.DuckDBPyConnection, cutoff: datetime | None) -> None:
    """Traces without a root whose spans were all stored before `cutoff` are measured from
    their earliest span by this connection's derivations from now on; None: no such trace."""
    if cutoff is None:
        con.execute("RESET VARIABLE budgetscope_root_cutoff")
    else:
        con.execute("SET VARIABLE budgetscope_root_cutoff = ?::TIMESTAMPTZ", [cutoff])


def remeasure_touched(con: duckdb.DuckDBPyConnection) -> None:
    """Measure the stored runs and steps of the traces in touched_traces against the declared
    budgets again (their spans unchanged since they were derived)."""
    _execute(con, "derive_budgets")
    _execute(con, "derive_measure")


def rebuild_all(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute every trace's runs and steps, in one transaction (after an upgrade that
    changes a derivation, or on a database whose spans were stored without deriving)."""
    con.begin()
    try:
        _execute(con, "derive_rebuild_prepare")
        refresh_touched(con)
        con.commit()
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # keep the failure's own error (a full disk)
            con.rollback()
        raise
