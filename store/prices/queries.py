"""The prices room's SQL (sql/), loaded once through the registry (store/file/sql_files.py)."""

from __future__ import annotations

from pathlib import Path

from store.file.sql_files import load_queries

PRICES_FOLDER = Path(__file__).with_name("sql")
QUERIES = load_queries(PRICES_FOLDER, frozenset({
    "unmatched_pairs", "store_matches", "bundled_version_changed", "price_overrides_list",
    "price_override_affected", "unpriced_models", "price_override_delete",
    "price_override_insert", "mark_price_affected"}))


def query(name: str) -> str:
    return QUERIES[name].text


def statements(name: str) -> list[str]:
    """A file's statements without their comments, to run one by one (DuckDB binds parameters
    per statement, and a `$name` in a comment must not count as one)."""
    code = "\n".join(line for line in QUERIES[name].text.splitlines()
                     if not line.lstrip().startswith("--"))
    return [part.strip() for part in code.split(";\n") if part.strip()]
