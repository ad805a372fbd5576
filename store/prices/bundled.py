"""The bundled price table: genai-prices (docs/metrics.md §11.3).

genai-prices holds dated prices for some 2,300 models of 47 providers, as Python data in its
wheel; it never fetches anything unless its updater is started, which budgetscope never does.
The derivation prices spans in SQL, so each (model, provider) pair of a metered span is matched
here once, through genai-prices' public API (`calc_price` on a zero usage names the model and
provider it matched; their dataclasses give the conditional prices, their start dates and
times of day, and the tiers), and kept in price_matches, bundled_conditions and bundled_prices
(store/file/schema/prices.sql). The derivation (store/derive/statements.py) asks for the pairs
its metered spans bring that were never matched, in the same transaction.

The package is imported on the first match only: importing it and its data costs ~0.2-0.5 s,
which no command should pay at start-up. Its version is kept in budgetscope_meta; a file last
matched by another version forgets its matches and re-measures the runs priced from them
(check_version, run once by each derivation runner).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import ROUND_HALF_EVEN, Decimal
from functools import cache
from typing import TYPE_CHECKING, Any

import duckdb

from store.prices.queries import query, statements

if TYPE_CHECKING:
    import pyarrow as pa

PACKAGE = "genai-prices"
VERSION_KEY = "genai_prices_version"
# A model name longer than this matches nothing a price table holds (the derivation keeps such
# names, escaped wherever shown, but never hands them to the matcher).
MAX_MODEL_CHARS = 256
# genai-prices' price keys → the quantities the derivation prices (docs/metrics.md §11.3);
# requests_kcount is USD per 1,000 calls, the others USD per million tokens.
QUANTITIES = (("input_mtok", "input"), ("cache_read_mtok", "cache_read"),
              ("cache_write_mtok", "cache_write"), ("output_mtok", "output"),
              ("output_reasoning_mtok", "reasoning"), ("requests_kcount", "request"))
# A rate in the tables is pico-dollars per million (tokens, or calls): USD/Mtok × 10^12, and
# USD per 1,000 calls × 10^15.
_SCALE = {"request": Decimal(10) ** 15}
_PICO = Decimal(10) ** 12
_DAY_NS = 86_400 * 10**9
_BASE_TIER = -1


@cache
def installed_version() -> str:
    """The genai-prices release installed (read from its metadata, not by importing it)."""
    return importlib.metadata.version(PACKAGE)


def model_count() -> int:
    """How many models the bundled table prices (imports it)."""
    return sum(len(provider.models) for provider in _providers())


def _providers() -> list[Any]:
    from genai_prices import data_snapshot  # the bundled snapshot, never an update

    return list(data_snapshot.get_snapshot().providers)


def check_version(con: duckdb.DuckDBPyConnection) -> bool:
    """Record the installed version of the bundled table; when the file was last matched by
    another one, forget every match and mark the runs it priced (or left unpriced) for
    re-measuring. Returns whether it changed."""
    row = con.execute("SELECT value FROM budgetscope_meta WHERE key = ?",
                      [VERSION_KEY]).fetchone()
    version = installed_version()
    if row is not None and row[0] == version:
        return False
    if row is None:  # a new file, or one from before prices: nothing was matched yet
        con.execute("INSERT OR REPLACE INTO budgetscope_meta VALUES (?, ?)",
                    [VERSION_KEY, version])
        return False
    for statement in statements("bundled_version_changed"):
        con.execute(statement, {"version": version} if "$version" in statement else None)
    return True


@dataclass
class _Found:
    """What the matcher kept of the new pairs, as the rows of the three tables."""

    matches: dict[str, list[Any]] = field(
        default_factory=lambda: {"model_ref": [], "provider": [], "bundled_ref": []})
    conditions: dict[str, list[Any]] = field(default_factory=lambda: {
        "bundled_ref": [], "cond": [], "start_ns": [], "tod_start_ns": [], "tod_end_ns": []})
    prices: dict[str, list[Any]] = field(default_factory=lambda: {
        "bundled_ref": [], "cond": [], "quantity": [], "tier_start": [], "rate": []})
    models: set[str] = field(default_factory=set)


def match_new_pairs(con: duckdb.DuckDBPyConnection) -> int:
    """Match the pairs of derive_metered never matched before, and keep what was found.
    Returns how many pairs were matched (found or not)."""
    pairs = con.execute(query("unmatched_pairs")).fetchall()
    if not pairs:
        return 0
    tables = matched_tables(pairs)
    for name, table in tables.items():
        con.register(name, table)
    try:
        for statement in statements("store_matches"):
            con.execute(statement)
    finally:
        for name in tables:
            con.unregister(name)
    check_version(con)  # a file matched for the first time records which table matched it
    return len(pairs)


def matched_tables(pairs: Iterable[tuple[str, str]]) -> dict[str, pa.Table]:
    """What the bundled table says of these (model_ref, provider) pairs, as the rows of
    price_matches, bundled_conditions and bundled_prices (`incoming_matches`,
    `incoming_conditions`, `incoming_prices`; each matched model's prices once): what the DuckDB
    file keeps, and the ClickHouse backend (store/clickhouse/prices.py) too."""
    import pyarrow as pa  # here, not at the top: the front's importers need it only to match

    found = _Found()
    for model_ref, provider in pairs:
        bundled_ref, model = lookup(model_ref, provider)
        found.matches["model_ref"].append(model_ref)
        found.matches["provider"].append(provider)
        found.matches["bundled_ref"].append(bundled_ref)
        if bundled_ref is not None and bundled_ref not in found.models:
            found.models.add(bundled_ref)
            _add_prices(found, bundled_ref, model)
    return {
        "incoming_matches": pa.table(found.matches, schema=pa.schema([
            ("model_ref", pa.string()), ("provider", pa.string()),
            ("bundled_ref", pa.string())])),
        "incoming_conditions": pa.table(found.conditions, schema=pa.schema([
            ("bundled_ref", pa.string()), ("cond", pa.int32()), ("start_ns", pa.int64()),
            ("tod_start_ns", pa.int64()), ("tod_end_ns", pa.int64())])),
        "incoming_prices": pa.table(found.prices, schema=pa.schema([
            ("bundled_ref", pa.string()), ("cond", pa.int32()), ("quantity", pa.string()),
            ("tier_start", pa.int64()), ("rate", pa.int64())])),
    }


def lookup(model_ref: str, provider: str) -> tuple[str | None, Any]:
    """The bundled model a pair names: genai-prices' own match of the model as the span names
    it, else of its part after a `provider/` prefix (both with the pair's provider, none when
    ''). A provider genai-prices does not know matches nothing: its models are not priced from
    another provider's table. Returns (its provider/model id, its ModelInfo) or (None, None)."""
    if len(model_ref) > MAX_MODEL_CHARS or not model_ref.isprintable():
        return None, None
    from genai_prices import Usage, calc_price

    names = [model_ref]
    prefix, slash, rest = model_ref.partition("/")
    if slash and prefix and rest:
        names.append(rest)
    for name in names:
        try:
            found = calc_price(Usage(), name, provider_id=provider or None)
        except (LookupError, ValueError):
            continue
        return f"{found.provider.id}/{found.model.id}", found.model
    return None, None


def _add_prices(found: _Found, bundled_ref: str, model: Any) -> None:
    from genai_prices import types

    prices = model.prices
    conditional = prices if isinstance(prices, list) else [
        types.ConditionalPrice(constraint=None, prices=prices)]
    for cond, price in enumerate(conditional):
        start_ns, tod = _constraint(price.constraint)
        found.conditions["bundled_ref"].append(bundled_ref)
        found.conditions["cond"].append(cond)
        found.conditions["start_ns"].append(start_ns)
        found.conditions["tod_start_ns"].append(tod[0])
        found.conditions["tod_end_ns"].append(tod[1])
        for key, quantity in QUANTITIES:
            value = vars(price.prices).get(key)
            if value is None:
                continue
            tiers = ([(_BASE_TIER, value)] if isinstance(value, Decimal) else [
                (_BASE_TIER, value.base), *((tier.start, tier.price) for tier in value.tiers)])
            for tier_start, rate in tiers:
                found.prices["bundled_ref"].append(bundled_ref)
                found.prices["cond"].append(cond)
                found.prices["quantity"].append(quantity)
                found.prices["tier_start"].append(int(tier_start))
                found.prices["rate"].append(rate_of(Decimal(rate), quantity))


def rate_of(usd: Decimal, quantity: str = "input") -> int:
    """A price as the tables hold it: pico-dollars per million tokens (or calls), rounded
    half to even (genai-prices' data holds a few rates with float noise past 12 decimals)."""
    return int((usd * _SCALE.get(quantity, _PICO)).quantize(Decimal(1), ROUND_HALF_EVEN))


def _constraint(constraint: Any) -> tuple[int | None, tuple[int | None, int | None]]:
    """(start_ns, (tod_start_ns, tod_end_ns)) of a conditional price's constraint, in UTC."""
    if constraint is None:
        return None, (None, None)
    start_date = getattr(constraint, "start_date", None)
    if isinstance(start_date, date):
        midnight = datetime(start_date.year, start_date.month, start_date.day, tzinfo=UTC)
        return int(midnight.timestamp()) * 10**9, (None, None)
    return None, (_time_ns(constraint.start_time), _time_ns(constraint.end_time))


def _time_ns(value: time) -> int:
    """A time of day as nanoseconds after UTC midnight (a naive time is UTC)."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    as_utc = datetime.combine(date(1970, 1, 1), aware).astimezone(UTC)
    seconds = as_utc.hour * 3600 + as_utc.minute * 60 + as_utc.second
    return (seconds * 10**6 + as_utc.microsecond) * 1000 % _DAY_NS
