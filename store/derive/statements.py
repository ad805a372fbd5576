"""Keeps the derived runs, steps and metered spans in step with spans (docs/metrics.md §1-§6, §11),
with the declared budgets (docs/guide.md#declaring-budgets) and with the prices (§11.3).

`refresh_touched` recomputes only the traces in the temp table touched_traces, from all their stored
spans: the files of RECOGNISE recognise the steps and classes, derive_usage.sql the spans that carry
usage, derive_cost.sql prices them and sums them by step and by run, derive_measure.sql applies B
and the token and dollar budgets. `remeasure_touched` runs only the second half, over the stored
runs, steps and metered spans (derive_budgets.sql): what a change of a declared budget, a cap or a
price moves. PendingDerivations in pending.py calls them; scheduling.py says when. The derivation's
SQL is in sql/ beside this module (store/derive/sql/), its `/*@name*/` markers filled from
conventions.py (docs/conventions.md, docs/metrics.md §3) once, at import.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import duckdb

from store.derive import conventions
from store.file.sql_files import Query, load_queries
from store.prices.bundled import match_new_pairs

DERIVE_FOLDER = Path(__file__).with_name("sql")
# The recognition, in order (derive_refresh.sql says why the walk runs more than once): each file
# with the gate it runs under (None: always; a gate no earlier statement set: never).
RECOGNITION: tuple[tuple[str, str | None], ...] = (
    ("derive_refresh", None), ("derive_walk", None),
    ("derive_reach", "orphans_later"), ("derive_walk", "orphans_rewalk"),
    ("derive_recognise", None), ("derive_walk", "rewalk"), ("derive_steps", None))
RECOGNISE = tuple(name for name, _ in RECOGNITION)
DERIVE_NAMES = frozenset({*RECOGNISE, "derive_usage", "derive_cost", "derive_measure",
                          "derive_budgets", "derive_drop", "derive_rebuild_prepare",
                          "derive_explain"})
# Most statements run whatever the traces hold; one preceded by `-- when: NAME` runs only when
# the gate NAME is true, and a statement marked `-- gates` is a one-row query whose boolean
# columns set gates. The statements that amend a few rows (orphans, sibling twins, a second walk)
# then cost nothing on the traces that have none: each statement has a fixed cost of ~1-3 ms,
# which the derivation pays once a turn whatever the turn holds.
_WHEN = re.compile(r"^-- when: (?P<gate>\w+)\s*$", re.MULTILINE)
_WHEN_LINE = re.compile(r"^-- when:", re.MULTILINE)
_GATES = re.compile(r"^-- gates\b", re.MULTILINE)


def with_conventions(queries: dict[str, Query], dialect: str) -> dict[str, Query]:
    """The derivations' `/*@name*/` markers filled from conventions.py (docs/conventions.md,
    docs/metrics.md §3)."""
    return {name: replace(query, text=conventions.render(query.text, dialect))
            if "/*@" in query.text else query for name, query in queries.items()}


QUERIES = with_conventions(load_queries(DERIVE_FOLDER, DERIVE_NAMES), "duckdb")


@dataclass(frozen=True)
class _Piece:
    statement: duckdb.Statement
    when: str | None  # the gate it runs under
    sets_gates: bool


_PIECES: dict[str, list[_Piece]] = {}


def file_statements(con: duckdb.DuckDBPyConnection, name: str) -> list[_Piece]:
    """A file's statements, parsed once a process, with the gate each runs under: parsing the
    derivation's text (its rendered conventions are long) cost ~45 ms of each run, more than
    executing many of them."""
    found = _PIECES.get(name)
    if found is None:
        found = []
        for statement in con.extract_statements(QUERIES[name].text):
            when = _WHEN.search(statement.query)
            if when is None and _WHEN_LINE.search(statement.query):
                # a gate this pattern cannot read would silently run the statement always (as
                # `row_11` did under a letters-only pattern)
                raise ValueError(f"{name}.sql: a `-- when:` line names no gate: "
                                 f"{statement.query.strip()[:80]!r}")
            found.append(_Piece(statement, when["gate"] if when else None,
                                bool(_GATES.search(statement.query))))
        _PIECES[name] = found
    return found


def execute_file(con: duckdb.DuckDBPyConnection, name: str,
                 gates: dict[str, bool] | None = None) -> None:
    """The statements of derivation file `name`, each under its gate (gates None: all of
    them). Every caller here looks it up in the module at each call, so a benchmark or a test
    that replaces it (to time or record each file) sees every statement the derivation runs."""
    for piece in file_statements(con, name):
        if piece.when is not None and gates is not None:
            if piece.when not in gates:
                raise LookupError(f"{name}.sql: `-- when: {piece.when}` names a gate that no "
                                  "earlier `-- gates` statement sets")
            if not gates[piece.when]:
                continue
        result = con.execute(piece.statement)
        if piece.sets_gates and gates is not None:
            row = result.fetchone()
            names = [column[0] for column in result.description or ()]
            gates.update({key: bool(value) for key, value in zip(names, row or (), strict=True)})


def recognise(con: duckdb.DuckDBPyConnection) -> dict[str, bool]:
    """The recognition of the traces in touched_traces, leaving its temp tables for
    derive_measure.sql (and derive_explain.sql); returns its gates."""
    gates: dict[str, bool] = {}
    for name, gate in RECOGNITION:
        if gate is None or gates.get(gate, False):
            execute_file(con, name, gates)
    return gates


def refresh_touched(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute runs and steps of the traces listed in the temp table touched_traces."""
    gates = recognise(con)
    execute_file(con, "derive_usage", gates)  # the spans that carry usage (docs/metrics.md §11)
    _measure(con, gates)
    execute_file(con, "derive_drop")


def _measure(con: duckdb.DuckDBPyConnection, gates: dict[str, bool]) -> None:
    """What depends on budgets and prices: the cost of the metered spans (the bundled table
    asked first about the models it was never asked about), then the runs and steps."""
    if gates.get("usage"):
        match_new_pairs(con)
    execute_file(con, "derive_cost", gates)
    execute_file(con, "derive_measure", gates)  # its deletes under the gate `seen_before`


def set_root_cutoff(con: duckdb.DuckDBPyConnection, cutoff: datetime | None) -> None:
    """Traces without a root whose spans were all stored before `cutoff` are measured from
    their earliest span by this connection's derivations from now on; None: no such trace
    (docs/conventions.md, "A trace without its root"; the connection's variable
    budgetscope_root_cutoff, which derive_refresh.sql reads)."""
    if cutoff is None:
        con.execute("RESET VARIABLE budgetscope_root_cutoff")
    else:
        con.execute("SET VARIABLE budgetscope_root_cutoff = ?::TIMESTAMPTZ", [cutoff])


def remeasure_touched(con: duckdb.DuckDBPyConnection) -> None:
    """Measure the stored runs, steps and metered spans of the traces in touched_traces
    against the declared budgets and the prices again (their spans unchanged since they were
    derived)."""
    gates: dict[str, bool] = {}
    execute_file(con, "derive_budgets", gates)
    _measure(con, gates)


def rebuild_all(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute every trace's runs and steps, in one transaction (after an upgrade that
    changes a derivation, or on a database whose spans were stored without deriving)."""
    con.begin()
    try:
        execute_file(con, "derive_rebuild_prepare")
        refresh_touched(con)
        con.commit()
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # keep the failure's own error (a full disk)
            con.rollback()
        raise
