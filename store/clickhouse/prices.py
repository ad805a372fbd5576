"""Model prices on the ClickHouse backend (docs/metrics.md §11.3): the bundled table's rows and
the prices a team sets, kept in ClickHouse tables (sql/prices/) that derive_cost.sql reads.

The same data as the DuckDB file's, kept the same way, by the same code:
- the bundled table: each (model, provider) pair of a metered span is matched once through
  genai-prices' public API by store/prices/bundled.py (`matched_tables`, what the DuckDB file
  stores too), during the build (`match_new_pairs`, between derive_usage.sql and
  derive_cost.sql); the installed version is kept in budgetscope_meta, and another version
  forgets the matches (`prepare`), so the next build matches and prices every pair again;
- the prices a team sets: a change is checked by store/prices/overrides.py (PriceChange) and
  stored here; the derived tables are re-measured whole after it, as after a declared budget
  (store/clickhouse/declared.py), since the prices are part of what derive_state.sql compares.

This module does not import the package (store/clickhouse/__init__.py calls it from its
build): the connection is any object with the methods of `Connection`.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from store.file.sql_files import CLICKHOUSE_PARAMETER, Query, load_queries, split_statements
from store.prices.bundled import PACKAGE, VERSION_KEY, installed_version, matched_tables
from store.prices.overrides import PriceApplied, PriceChange, PriceEntry, Unpriced

PRICES_FOLDER = Path(__file__).with_name("sql") / "prices"
QUERIES = load_queries(PRICES_FOLDER, frozenset({
    "prices_tables", "prices_unmatched_pairs", "prices_bundled_refs", "prices_meta_get",
    "prices_meta_set", "prices_forget_matches", "prices_override_delete",
    "prices_override_insert", "prices_override_get", "prices_overrides_list",
    "prices_override_affected", "prices_unpriced_models"}), CLICKHOUSE_PARAMETER)
# The tables the bundled rows go to (store/prices/bundled.py's names for them → ours).
BUNDLED_TABLES = {"incoming_matches": "budgetscope_price_matches",
                  "incoming_conditions": "budgetscope_bundled_conditions",
                  "incoming_prices": "budgetscope_bundled_prices"}


class Connection(Protocol):
    """What this module uses of store.clickhouse.ClickHouseConnection."""

    def frame(self, query: Query, parameters: dict[str, Any]) -> pd.DataFrame: ...

    def command(self, text: str, parameters: dict[str, Any] | None = None) -> None: ...

    def insert_arrow(self, table: str, data: pa.Table) -> None: ...

    def scalar(self, text: str) -> Any: ...


def _run(con: Connection, name: str, parameters: dict[str, Any] | None = None) -> None:
    """Each statement of a file, with the parameters it names."""
    for statement in split_statements(QUERIES[name].text):
        named = {m["name"] for m in CLICKHOUSE_PARAMETER.finditer(statement)}
        con.command(statement, {k: v for k, v in (parameters or {}).items() if k in named})


# The connections prepared in this process (the tables exist, the version is recorded): readers
# ask before every report (store.clickhouse.derived_state), and the DDL costs a round trip each.
_PREPARED: weakref.WeakSet[Any] = weakref.WeakSet()


def prepare(con: Connection) -> bool:
    """Create the price tables when missing, and record the installed bundled table's version;
    when the matches were made by another version, forget them all (the build that follows
    matches every pair again: derive_state.sql sees the version change). Once per connection
    and process. Returns whether the version changed."""
    if con in _PREPARED:
        return False
    _run(con, "prices_tables")
    stored = con.frame(QUERIES["prices_meta_get"], {"key": VERSION_KEY}).iat[0, 0]
    version = installed_version()
    if stored != version:
        if stored:  # matched by another version
            _run(con, "prices_forget_matches")
        _run(con, "prices_meta_set", {"key": VERSION_KEY, "value": version})
    _PREPARED.add(con)
    return bool(stored) and stored != version


def match_new_pairs(con: Connection) -> int:
    """Match the pairs of budgetscope_tmp_metered (the build's metered spans) never matched
    before, and keep what was found; returns how many pairs were matched (found or not)."""
    pairs = con.frame(QUERIES["prices_unmatched_pairs"], {})
    if pairs.empty:
        return 0
    tables = matched_tables(zip(pairs["model_ref"], pairs["provider"], strict=True))
    kept = set(con.frame(QUERIES["prices_bundled_refs"], {})["bundled_ref"])
    for name, table in tables.items():
        if name != "incoming_matches" and kept:  # a model's prices are kept once
            table = table.filter(pc.invert(pc.is_in(
                table["bundled_ref"], value_set=pa.array(sorted(kept), pa.string()))))
        if table.num_rows:
            con.insert_arrow(BUNDLED_TABLES[name], table)
    return len(pairs)


def _key(change: PriceChange) -> dict[str, Any]:
    return {"model_pattern": change.model, "provider": change.provider,
            "from_ns": change.from_ns}


def _entry(con: Connection, change: PriceChange) -> tuple[Any, ...] | None:
    rows = con.frame(QUERIES["prices_override_get"], _key(change))
    if rows.empty:
        return None
    return tuple(None if pd.isna(value) else int(value) for value in rows.iloc[0])


def apply(con: Connection, change: PriceChange) -> PriceApplied:
    """Store a checked change (ClickHouse has no transactions: a delete, then an insert). The
    caller then re-measures the derived tables (store.clickhouse.ensure_derived), which prices
    every run again; `runs` and `traces` count those whose metered spans the entry prices or
    may price, as on a DuckDB file."""
    change = change.checked()
    prepare(con)
    before = _entry(con, change)
    _run(con, "prices_override_delete", _key(change))
    if change.action == "set":
        _run(con, "prices_override_insert", {
            **_key(change), "input_rate": change.input_rate, "output_rate": change.output_rate,
            "cache_read_rate": change.cache_read_rate,
            "cache_write_rate": change.cache_write_rate})
    after = _entry(con, change)
    affected = con.frame(QUERIES["prices_override_affected"], _key(change)).iloc[0] \
        if _has_metered_spans(con) else None
    matching = 0 if affected is None else int(affected["matching_spans"])
    if before == after or affected is None:
        return PriceApplied(change, before != after, 0, 0, matching)
    return PriceApplied(change, True, int(affected["runs"]), int(affected["traces"]), matching)


def _has_metered_spans(con: Connection) -> bool:
    """Whether a build made budgetscope_metered_spans yet (a backend never built has none)."""
    return con.scalar("EXISTS TABLE budgetscope_metered_spans") == 1


def entries(con: Connection) -> list[PriceEntry]:
    """Every price set, by pattern, provider and date (as store/prices/overrides.entries)."""
    prepare(con)
    frame = con.frame(QUERIES["prices_overrides_list"], {})
    return [PriceEntry(row.model_pattern, row.provider, _int(row.from_ns),
                       int(row.input_rate), int(row.output_rate), _int(row.cache_read_rate),
                       _int(row.cache_write_rate), str(row.declared_at))
            for row in frame.itertuples()]


def _int(value: Any) -> int | None:
    return None if pd.isna(value) else int(value)


def _text(value: Any) -> str | None:
    return None if pd.isna(value) else str(value)


def unpriced(con: Connection) -> list[Unpriced]:
    """Every model seen without a price, the most steps first (after a build)."""
    if not _has_metered_spans(con):
        return []
    frame = con.frame(QUERIES["prices_unpriced_models"], {})
    return [Unpriced(_text(row.model), _text(row.provider), int(row.steps), int(row.spans),
                     int(row.runs)) for row in frame.itertuples()]


def listing(con: Connection) -> dict[str, Any]:
    """What `prices list` and `prices check` show, as store/prices/overrides.listing gives it
    for a DuckDB file (the bundled table's model count imports it, ~0.2 s)."""
    from store.prices.bundled import model_count

    return {"overrides": [entry.to_json() for entry in entries(con)],
            "bundled": {"name": PACKAGE, "version": installed_version(),
                        "models": model_count()},
            "unpriced": [model.to_json() for model in unpriced(con)]}
