"""Where things are: the database path and the bundled sample traces."""

from __future__ import annotations

from pathlib import Path

from store import DB_ENV, DEFAULT_DB

DEMO_DB = "budgetscope-demo.duckdb"
# The CLI's --server: the budgetscope serve that report, run, check, simulate and budgets use.
SERVER_ENV = "BUDGETSCOPE_SERVER"
SAMPLE_TRACES = Path(__file__).resolve().parent.parent / "sample_traces" / "sample.jsonl.gz"

__all__ = ["DB_ENV", "DEFAULT_DB", "DEMO_DB", "SAMPLE_TRACES", "SERVER_ENV"]
