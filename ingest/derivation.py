"""Derived tables (runs, steps) catching up with stored spans, outside the acknowledged write.

The writer marks every trace it stores spans of in `pending_derivations`, in the spans'
transaction. `PendingDerivations.run` takes the marked traces in slices and, for each slice,
calls the derivation (queries.derive.refresh_touched, injected so that ingest does not depend
on queries) with the temp table `touched_traces(trace_id, since)`, and removes the marks, in one
transaction. A crash at any point leaves the marks of whatever was not derived, and the next
run derives it: nothing acknowledged is ever left underived.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import duckdb

Derive = Callable[[duckdb.DuckDBPyConnection], None]
_SQL = Path(__file__).with_name("sql")
_TAKE_SLICE = (_SQL / "take_pending_derivations.sql").read_text(encoding="utf-8")
_CLEAR_SLICE = (_SQL / "clear_pending_derivations.sql").read_text(encoding="utf-8")


class PendingDerivations:
    """Runs the derivation over the marked traces, `slice_traces` at a time."""

    def __init__(self, derive: Derive, slice_traces: int = 20_000) -> None:
        self.derive = derive
        self.slice_traces = slice_traces
        self.traces_derived = 0
        self.seconds = 0.0

    @staticmethod
    def count(con: duckdb.DuckDBPyConnection) -> int:
        """How many traces are marked (a trace marked by several writes counts once)."""
        row = con.execute("SELECT count(DISTINCT trace_id) FROM pending_derivations").fetchone()
        return int(row[0]) if row else 0

    def run(self, con: duckdb.DuckDBPyConnection) -> int:
        """Derive every marked trace; returns how many. Raises what the derivation raises
        (the slice being derived stays marked)."""
        started = time.perf_counter()
        derived = 0
        while True:
            con.begin()
            try:
                con.execute(_TAKE_SLICE, [self.slice_traces])
                row = con.execute("SELECT count(*) FROM touched_traces").fetchone()
                taken = int(row[0]) if row else 0
                if taken:
                    self.derive(con)
                    con.execute(_CLEAR_SLICE)
                con.commit()
            except BaseException:
                con.rollback()
                raise
            derived += taken
            if taken < self.slice_traces:
                break
        self.traces_derived += derived
        self.seconds += time.perf_counter() - started
        return derived
