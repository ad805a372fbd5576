"""The prices a team sets (docs/metrics.md §11.3, §11.8): `budgetscope prices set/unset/list/check`.

An entry prices the metered spans of a model pattern (a trailing `*` matches a prefix, for
fine-tuned ids), of one provider or any, from a date on or from the beginning, ahead of the
bundled table. Entries live in price_overrides (store/file/schema/prices.sql); the derivation
chooses among them in SQL (store/derive/sql/derive_cost.sql). A change is stored and the traces
whose spans it prices (or priced) are marked for re-measuring in one transaction, as a declared
budget's change is (store/declared/budgets.py): the derivation then re-prices exactly those
from their stored metered spans, past runs included; reported costs never change.

Everything that takes a price from a person (the CLI, the server's /prices endpoint) checks it
with PriceChange.checked, so both refuse the same things with the same messages.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import duckdb

from store.prices.bundled import PACKAGE, installed_version, model_count, rate_of
from store.prices.queries import query

ACTIONS = ("set", "unset")
MAX_PATTERN_CHARS = 512
# A price above a million dollars per million tokens is a typo, and keeps a rate (pico-dollars
# per million tokens) far inside 64 bits.
MAX_USD_PER_MTOK = Decimal(10) ** 6
MAX_DECIMALS = 12  # a rate is exact to the pico-dollar per million tokens
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class PriceError(ValueError):
    """A price that cannot be stored, with a one-line message naming the problem."""


def parse_rate(text: Any, what: str = "price") -> int:
    """'2.50' (USD per million tokens) → 2500000000000 pico-dollars per million tokens. 0 is
    allowed and means free; a negative price, or more than 12 decimals, is refused."""
    try:
        value = Decimal(str(text).strip().lstrip("$"))
    except InvalidOperation:
        raise PriceError(f"{what} {text!r} is not a number of USD per million tokens "
                         "(e.g. 2.50)") from None
    if not value.is_finite():
        raise PriceError(f"{what} {text!r} is not a finite number")
    if value < 0:
        raise PriceError(f"{what} {text!r} is negative: a price is 0 (free) or more")
    if value > MAX_USD_PER_MTOK:
        raise PriceError(f"{what} {text!r} is more than a million USD per million tokens")
    if -value.as_tuple().exponent > MAX_DECIMALS and value != value.quantize(
            Decimal(10) ** -MAX_DECIMALS):
        raise PriceError(f"{what} {text!r} has more than {MAX_DECIMALS} decimals")
    return rate_of(value)


def parse_from(text: str) -> int:
    """'2026-12-01' → that day's 00:00 UTC, in nanoseconds since the epoch."""
    if not _DATE.match(str(text).strip()):
        raise PriceError(f"--from {text!r} is not a date YYYY-MM-DD")
    try:
        day = dt.date.fromisoformat(str(text).strip())
    except ValueError as error:
        raise PriceError(f"--from {text!r} is not a date: {error}") from None
    midnight = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    return int(midnight.timestamp()) * 10**9


def format_usd_per_mtok(rate: int | None) -> str:
    """2500000000000 → '2.5' (USD per million tokens, trailing zeros trimmed)."""
    if rate is None:
        return ""
    text = f"{Decimal(rate) / Decimal(10) ** 12:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_day(from_ns: int | None) -> str:
    if from_ns is None:
        return ""
    return dt.datetime.fromtimestamp(from_ns / 10**9, dt.UTC).strftime("%Y-%m-%d")


def checked_pattern(pattern: Any) -> str:
    """A model pattern, lower-cased: a model name, or a prefix and a trailing `*`."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise PriceError("model is empty: name the model as `prices check` shows it, or a "
                         "prefix followed by * (e.g. ft:gpt-4o-mini:acme:*)")
    if _CONTROL.search(pattern) or len(pattern) > MAX_PATTERN_CHARS:
        raise PriceError(f"model {pattern[:80]!r} holds control characters or bidirectional "
                         f"overrides, or is longer than {MAX_PATTERN_CHARS} characters")
    if "*" in pattern[:-1]:
        raise PriceError(f"model {pattern!r}: only a trailing * matches (a prefix)")
    return pattern.strip().lower()


def checked_provider(provider: Any) -> str:
    """A provider as the price table names them (lower-cased), or '' for any."""
    if provider is None:
        return ""
    if not isinstance(provider, str) or _CONTROL.search(provider) or len(provider) > 128:
        raise PriceError(f"provider {str(provider)[:80]!r} is not a provider name")
    return provider.strip().lower()


@dataclass(frozen=True)
class PriceChange:
    """Set or unset the price entry (model pattern, provider, from_ns). A set carries its
    rates, in pico-dollars per million tokens (cache rates None: charged at the input rate)."""

    action: str
    model: str
    provider: str = ""
    from_ns: int | None = None
    input_rate: int | None = None
    output_rate: int | None = None
    cache_read_rate: int | None = None
    cache_write_rate: int | None = None

    def checked(self) -> PriceChange:
        """This change with every field checked; raises PriceError."""
        if self.action not in ACTIONS:
            raise PriceError(f"unknown action {self.action!r}; one of {', '.join(ACTIONS)}")
        model, provider = checked_pattern(self.model), checked_provider(self.provider)
        if self.from_ns is not None and (isinstance(self.from_ns, bool)
                                         or not isinstance(self.from_ns, int)):
            raise PriceError(f"from_ns {self.from_ns!r} is not a time in nanoseconds")
        rates = (self.input_rate, self.output_rate, self.cache_read_rate, self.cache_write_rate)
        if self.action == "unset":
            return PriceChange("unset", model, provider, self.from_ns)
        if self.input_rate is None or self.output_rate is None:
            raise PriceError("a price needs --input and --output (USD per million tokens)")
        for name, rate in zip(("input", "output", "cache read", "cache write"), rates,
                              strict=True):
            if rate is None:
                continue
            if isinstance(rate, bool) or not isinstance(rate, int):
                raise PriceError(f"{name} price {rate!r} is not a whole number of pico-dollars "
                                 "per million tokens")
            if rate < 0:
                raise PriceError(f"{name} price is negative: a price is 0 (free) or more")
            if rate > rate_of(MAX_USD_PER_MTOK):
                raise PriceError(f"{name} price is more than a million USD per million tokens")
        return PriceChange("set", model, provider, self.from_ns, *rates)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, payload: Any) -> PriceChange:
        """From the server's wire form; raises PriceError for anything else."""
        if not isinstance(payload, dict) or not isinstance(payload.get("action"), str):
            raise PriceError('expected a JSON object {"action": "set"|"unset", "model": ...}')
        known = {key: payload.get(key) for key in cls.__dataclass_fields__}
        known["provider"] = known["provider"] or ""
        return cls(**known).checked()


@dataclass(frozen=True)
class PriceApplied:
    """What a change did: whether anything changed, how many runs (in how many traces) it
    marked for re-measuring, and how many stored metered spans its pattern matches at all
    (0: none yet; the price applies to those that arrive)."""

    change: PriceChange
    changed: bool
    runs: int
    traces: int
    matching_spans: int

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change.to_json(), "changed": self.changed, "runs": self.runs,
                "traces": self.traces, "matching_spans": self.matching_spans}


@dataclass(frozen=True)
class PriceEntry:
    model: str
    provider: str
    from_ns: int | None
    input_rate: int
    output_rate: int
    cache_read_rate: int | None
    cache_write_rate: int | None
    declared_at: str  # ISO 8601 UTC

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def apply(con: duckdb.DuckDBPyConnection, change: PriceChange) -> PriceApplied:
    """Store `change` and mark the traces it re-prices, in one transaction of `con` (the
    process's writing connection). The caller then runs the derivation (or lets serve's)."""
    change = change.checked()
    con.begin()
    try:
        applied = _apply_in_transaction(con, change)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return applied


def _key(change: PriceChange) -> dict[str, Any]:
    return {"model_pattern": change.model, "provider": change.provider,
            "from_ns": change.from_ns}


def _apply_in_transaction(con: duckdb.DuckDBPyConnection, change: PriceChange) -> PriceApplied:
    before = _entry(con, change)
    con.execute(query("price_override_delete"), _key(change))
    if change.action == "set":
        con.execute(query("price_override_insert"), {
            **_key(change), "input_rate": change.input_rate, "output_rate": change.output_rate,
            "cache_read_rate": change.cache_read_rate,
            "cache_write_rate": change.cache_write_rate})
    after = _entry(con, change)
    con.execute(query("price_override_affected"), _key(change))
    matching = _matching_spans(con, change)
    if before == after:  # nothing changed: no run's numbers move
        con.execute("DROP TABLE price_affected")
        return PriceApplied(change, False, 0, 0, matching)
    row = con.execute("SELECT count(*), coalesce(sum(runs), 0) FROM price_affected").fetchone()
    traces, runs = (int(row[0]), int(row[1])) if row else (0, 0)
    con.execute(query("mark_price_affected"))
    con.execute("DROP TABLE price_affected")
    return PriceApplied(change, True, runs, traces, matching)


def _entry(con: duckdb.DuckDBPyConnection, change: PriceChange) -> tuple[Any, ...] | None:
    row = con.execute(
        "SELECT input_rate, output_rate, cache_read_rate, cache_write_rate FROM price_overrides "
        "WHERE model_pattern = $model_pattern AND provider = $provider "
        "AND from_ns IS NOT DISTINCT FROM $from_ns", _key(change)).fetchone()
    return None if row is None else tuple(row)


def _matching_spans(con: duckdb.DuckDBPyConnection, change: PriceChange) -> int:
    """Stored metered spans of the pattern's models (any time, any cost source)."""
    row = con.execute(
        "SELECT count(*) FROM metered_spans WHERE lower(model) = $model_pattern "
        "OR (ends_with($model_pattern, '*') "
        "AND starts_with(lower(model), left($model_pattern, -1)))",
        {"model_pattern": change.model}).fetchone()
    return int(row[0]) if row else 0


def entries(con: duckdb.DuckDBPyConnection) -> list[PriceEntry]:
    """Every price set, by pattern, provider and date."""
    return [PriceEntry(pattern, provider, from_ns, input_rate, output_rate, cache_read,
                       cache_write, declared.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            for pattern, provider, from_ns, input_rate, output_rate, cache_read, cache_write,
            declared in con.execute(query("price_overrides_list")).fetchall()]


@dataclass(frozen=True)
class Unpriced:
    """A model seen on metered spans with no price (docs/metrics.md §11.3 step 3)."""

    model: str | None  # None: the spans name no model
    provider: str | None
    steps: int
    spans: int
    runs: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def unpriced(con: duckdb.DuckDBPyConnection) -> list[Unpriced]:
    """Every model seen without a price, the most steps first."""
    return [Unpriced(*row) for row in con.execute(query("unpriced_models")).fetchall()]


def listing(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """What `prices list` and `prices check` show: the prices set, the bundled table (its name,
    version and model count; importing it costs ~0.2 s, paid only here), and the models seen
    without a price. JSON-able, for the server's /prices."""
    return {"overrides": [entry.to_json() for entry in entries(con)],
            "bundled": {"name": PACKAGE, "version": installed_version(),
                        "models": model_count()},
            "unpriced": [model.to_json() for model in unpriced(con)]}
