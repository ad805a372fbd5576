"""Reading docs/metrics.md §11's derived rows back in the cost tests: a span's typed usage
columns, its metered_spans row, and money in nano-dollars from dollars written in the test."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import duckdb

USAGE_COLUMNS = ("usage_input", "usage_cache_read", "usage_cache_write", "usage_output",
                 "usage_reasoning", "usage_total", "usage_input_includes_cache",
                 "cost_reported_nano", "usage_ignored", "budget_total_tokens",
                 "budget_total_usd_nano")


def nano(dollars: str) -> int:
    """'0.0123' → 12300000: dollars written in a test as integer nano-dollars."""
    value = Decimal(dollars) * 10**9
    assert value == value.to_integral_value(), dollars
    return int(value)


def span_usage(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any]:
    """The typed usage columns of the one span with this name."""
    rows = con.execute(f"SELECT {', '.join(USAGE_COLUMNS)} FROM spans WHERE name = ?",
                       [name]).fetchall()
    assert len(rows) == 1, f"{len(rows)} spans named {name!r}"
    return dict(zip(USAGE_COLUMNS, rows[0], strict=True))


def metered(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any]:
    """The metered_spans row of the one span with this name."""
    cursor = con.execute("SELECT m.* FROM metered_spans m JOIN spans s "
                         "ON s.trace_id = m.trace_id AND s.span_id = m.span_id WHERE s.name = ?",
                         [name])
    rows = cursor.fetchall()
    assert len(rows) == 1, f"{len(rows)} metered rows for {name!r}"
    return dict(zip([d[0] for d in cursor.description], rows[0], strict=True))


def notes(con: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, str]:
    return dict(con.execute("SELECT note, detail FROM derivation_notes WHERE trace_id = ?",
                            [trace_id]).fetchall())
