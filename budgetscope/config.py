"""Where things are: the database path and the bundled sample traces."""

from __future__ import annotations

import os
from pathlib import Path

DB_ENV = "BUDGETSCOPE_DB"
DEFAULT_DB = "budgetscope.duckdb"
DEMO_DB = "budgetscope-demo.duckdb"
SAMPLE_TRACES = Path(__file__).resolve().parent.parent / "sample_traces" / "sample.jsonl.gz"


def database_path(given: str | None) -> str:
    return given or os.environ.get(DB_ENV) or DEFAULT_DB
