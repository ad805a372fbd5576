"""Keeps the derived runs and steps tables in step with spans (SPEC §1-§6).

`refresh_touched` is the SpanWriter's after_write hook: it runs inside the write transaction
and recomputes only the traces in the temp table touched_traces, from all their stored spans.
"""

from __future__ import annotations

import duckdb

from queries.loader import execute


def refresh_touched(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute runs and steps of the traces listed in the temp table touched_traces."""
    execute(con, "derive_refresh")


def rebuild_all(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute every trace's runs and steps, in one transaction (after an upgrade that
    changes a derivation, or on a database written without the hook)."""
    con.begin()
    try:
        execute(con, "derive_rebuild_prepare")
        execute(con, "derive_refresh")
        con.commit()
    except BaseException:
        con.rollback()
        raise
