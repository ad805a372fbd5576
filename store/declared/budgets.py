"""Declared budgets and step caps (docs/guide.md#declaring-budgets): checking them, storing them,
and marking the runs a change re-measures.

Most agents send no `budget.total_ms`; a team declares a budget per agent (and a default for all
agents) and per-step caps by step key instead. Both live in the database
(store/file/schema/declared_budgets.sql); the derivation reads them. A change is stored and the
affected traces are marked for measuring again in one transaction
(sql/declared_affected_by_*.sql): the derivation then re-measures exactly those (their stored
runs and steps, store/derive/pending.py), whichever process runs it, so past runs follow the change
as new ones do, and a crash between the two never leaves numbers measured against a budget that
is no longer declared.

Everything that takes a declaration from a person (the CLI, the server's endpoint, the
dashboard) checks it with `parse_change` / `Change.checked`, so the three refuse the same things
with the same messages.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from store.file.sql_files import DUCKDB_PARAMETER, load_queries

DECLARED_FOLDER = Path(__file__).with_name("sql")
DECLARED_QUERIES = load_queries(DECLARED_FOLDER, frozenset({
    "declared_budget_set", "declared_budget_unset", "declared_cap_set", "declared_cap_unset",
    "declared_affected_by_budget", "declared_affected_by_cap", "mark_declared_affected",
    "declared_list"}))


def _sql(name: str) -> str:
    return DECLARED_QUERIES[name].text


_BUDGET_SET = _sql("declared_budget_set")
_BUDGET_UNSET = _sql("declared_budget_unset")
_CAP_SET = _sql("declared_cap_set")
_CAP_UNSET = _sql("declared_cap_unset")
_AFFECTED_BY_BUDGET = _sql("declared_affected_by_budget")
_AFFECTED_BY_CAP = _sql("declared_affected_by_cap")
_MARK_AFFECTED = _sql("mark_declared_affected")
_LIST = _sql("declared_list")

# docs/metrics.md §2's step kinds: the first half of a step key.
STEP_KINDS = ("model", "tool", "subagent", "backoff", "queue", "reconcile", "other")
ACTIONS = ("set", "set_default", "unset", "unset_default", "cap", "uncap")
_DURATION = re.compile(r"^\s*(?P<sign>[-+]?)\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*"
                       r"(?P<unit>[a-zA-Z]*)\s*$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# A budget longer than a year is a typo (and B in ns must stay far inside 64 bits).
MAX_DURATION_MS = 366 * 86_400_000
MAX_NAME_CHARS = 512
# C0, DEL, C1 and the bidirectional overrides and isolates: nothing a name needs, and each
# acts on a terminal or reorders what is shown where the name is printed.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class DeclarationError(ValueError):
    """A declaration that cannot be stored, with a one-line message naming the problem."""


# docs/metrics.md §10, §11.5, §11.8: the dimensions a budget is declared in, each set and
# removed on its own: a duration (time), a token count, dollars per run, dollars per week.
DIMENSIONS = ("time", "tokens", "usd", "usd_per_week")
# A token budget above this is a typo (a span's own count is bounded the same,
# store/rows/usage.py); a dollar budget is bounded as a reported cost is.
MAX_TOKENS = 10**12
MAX_USD_NANO = 10**18
_TOKENS = re.compile(r"^\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[kKmM]?)\s*$")
_TOKEN_UNITS = {"": 1, "k": 1_000, "m": 1_000_000}
_USD = re.compile(r"^\s*\$?\s*(?P<whole>\d*)(?:\.(?P<fraction>\d*))?\s*$")


def parse_tokens(text: str, what: str = "token budget") -> int:
    """'200000' → 200000, '200k' → 200000, '1.5M' → 1500000: a whole, non-negative number of
    tokens, with an optional k (thousand) or M (million)."""
    match = _TOKENS.match(str(text))
    if match is None:
        raise DeclarationError(f"{what} {text!r} is not a token count; write a whole number, "
                               "optionally with k or M (e.g. 200000, 200k, 1.5M)")
    value = Decimal(match["number"]) * _TOKEN_UNITS[match["unit"].lower()]
    if value != value.to_integral_value():
        raise DeclarationError(f"{what} {text!r} is not a whole number of tokens")
    return checked_tokens(int(value), what, text)


def checked_tokens(value: Any, what: str = "token budget", shown: Any = None) -> int:
    """A token budget already as a number (the server's wire form): a whole number >= 0."""
    shown = value if shown is None else shown
    if isinstance(value, bool) or not isinstance(value, int):
        raise DeclarationError(f"{what} {shown!r} is not a whole number of tokens")
    if value < 0:
        raise DeclarationError(f"{what} {shown!r} is negative")
    if value > MAX_TOKENS:
        raise DeclarationError(f"{what} {shown!r} is more than 10^12 tokens")
    return value


def parse_usd_nano(text: str, what: str = "dollar budget") -> int:
    """'0.50' → 500000000 nano-dollars: a non-negative decimal with at most 9 places (a
    leading $ is allowed)."""
    match = _USD.match(str(text))
    if match is None or not (match["whole"] or match["fraction"]):
        hint = " is negative" if str(text).strip().startswith("-") else \
            " is not an amount of dollars; write a decimal such as 0.50 or 20"
        raise DeclarationError(f"{what} {text!r}{hint}")
    fraction = match["fraction"] or ""
    if len(fraction) > 9:
        raise DeclarationError(f"{what} {text!r} has more than 9 decimal places (the smallest "
                               "amount is a nano-dollar, 0.000000001)")
    nano = int(match["whole"] or "0") * 10**9 + int((fraction + "0" * 9)[:9])
    return checked_usd_nano(nano, what, text)


def checked_usd_nano(value: Any, what: str = "dollar budget", shown: Any = None) -> int:
    """A dollar budget already in nano-dollars (the server's wire form): a whole number >= 0."""
    shown = value if shown is None else shown
    if isinstance(value, bool) or not isinstance(value, int):
        raise DeclarationError(f"{what} {shown!r} is not a whole number of nano-dollars")
    if value < 0:
        raise DeclarationError(f"{what} {shown!r} is negative")
    if value > MAX_USD_NANO:
        raise DeclarationError(f"{what} {shown!r} is more than a billion dollars")
    return value


def parse_duration_ms(text: str, what: str = "duration") -> int:
    """'90s' → 90000, '250ms' → 250, '1.5m' → 90000, '2h', '1d'. A unit is required; zero,
    negative and fractional milliseconds are refused."""
    match = _DURATION.match(str(text))
    if match is None:
        raise DeclarationError(f"{what} {text!r} is not a duration; write a positive number "
                               "with a unit: ms, s, m, h or d (e.g. 90s, 2500ms, 5m)")
    unit = match["unit"].lower()
    if not unit:
        raise DeclarationError(f"{what} {text!r} has no unit: write e.g. {match['number']}s "
                               f"or {match['number']}ms (ms, s, m, h or d)")
    if unit not in _UNIT_MS:
        raise DeclarationError(f"{what} {text!r}: unknown unit {match['unit']!r}; use ms, s, "
                               "m, h or d")
    if match["sign"] == "-":
        raise DeclarationError(f"{what} {text!r} is negative: it must be a positive duration")
    value = float(match["number"]) * _UNIT_MS[unit]
    if value != int(value):
        raise DeclarationError(f"{what} {text!r} is not a whole number of milliseconds")
    return checked_ms(int(value), what, text)


def checked_ms(value: Any, what: str = "duration", shown: Any = None) -> int:
    """A duration already in milliseconds (the server's wire form): a positive integer."""
    shown = value if shown is None else shown
    if isinstance(value, bool) or not isinstance(value, int):
        raise DeclarationError(f"{what} {shown!r} is not a whole number of milliseconds")
    if value <= 0:
        raise DeclarationError(f"{what} {shown!r} is {'zero' if value == 0 else 'negative'}: "
                               "it must be a positive duration")
    if value > MAX_DURATION_MS:
        raise DeclarationError(f"{what} {shown!r} is longer than 366 days")
    return value


def checked_agent(name: Any) -> str:
    """An agent name as runs.agent holds it (gen_ai.agent.name, else service.name)."""
    if not isinstance(name, str) or not name.strip():
        raise DeclarationError("agent name is empty: name the agent as reports show it "
                               "(gen_ai.agent.name, else the service.name)")
    if _CONTROL.search(name) or len(name) > MAX_NAME_CHARS:
        raise DeclarationError(f"agent name {name[:80]!r} holds control characters or "
                               "bidirectional overrides, or is longer than "
                               f"{MAX_NAME_CHARS} characters")
    return name


def checked_step_key(key: Any) -> str:
    """A step key `kind:name` (docs/metrics.md §4) with a kind of docs/metrics.md §2, e.g.
    tool:fetch_report."""
    if not isinstance(key, str) or ":" not in key:
        raise DeclarationError(f"step key {key!r} is not kind:name (e.g. tool:fetch_report); "
                               f"the kind is one of {', '.join(STEP_KINDS)}")
    kind, _, name = key.partition(":")
    if kind not in STEP_KINDS:
        raise DeclarationError(f"step key {key!r}: {kind!r} is not a step kind; use one of "
                               f"{', '.join(STEP_KINDS)}")
    if not name.strip():
        raise DeclarationError(f"step key {key!r} has no name after {kind}: "
                               "(e.g. tool:fetch_report)")
    if _CONTROL.search(key) or len(key) > MAX_NAME_CHARS:
        raise DeclarationError(f"step key {key[:80]!r} holds control characters or "
                               "bidirectional overrides, or is longer than "
                               f"{MAX_NAME_CHARS} characters")
    return key


@dataclass(frozen=True)
class Change:
    """One change: set/unset an agent's budget, set/unset the default, cap/uncap a step key.
    `target` is the agent or step key (None for the default). A set declares the dimensions
    given (`duration_ms`, `tokens`, `usd_nano`, `usd_per_week_nano`; at least one) and keeps
    the others as they were; a cap takes `duration_ms`. An unset removes the `dimensions`
    named (DIMENSIONS; none: all of them)."""

    action: str
    target: str | None = None
    duration_ms: int | None = None
    tokens: int | None = None
    usd_nano: int | None = None
    usd_per_week_nano: int | None = None
    dimensions: tuple[str, ...] = ()

    def checked(self) -> Change:
        """This change with every field checked; raises DeclarationError."""
        if self.action not in ACTIONS:
            raise DeclarationError(f"unknown action {self.action!r}; one of {', '.join(ACTIONS)}")
        target: str | None
        if self.action in ("set", "unset"):
            target = checked_agent(self.target)
        elif self.action in ("cap", "uncap"):
            target = checked_step_key(self.target)
        else:
            target = None
        duration = tokens = usd = per_week = None
        dimensions: tuple[str, ...] = ()
        if self.action == "cap":
            duration = checked_ms(self.duration_ms, "cap")
        elif self.action in ("set", "set_default"):
            if (self.duration_ms, self.tokens, self.usd_nano,
                    self.usd_per_week_nano) == (None, None, None, None):
                raise DeclarationError("a budget needs at least one of a duration, --tokens, "
                                       "--usd or --usd-per-week")
            if self.duration_ms is not None:
                duration = checked_ms(self.duration_ms, "budget")
            if self.tokens is not None:
                tokens = checked_tokens(self.tokens)
            if self.usd_nano is not None:
                usd = checked_usd_nano(self.usd_nano)
            if self.usd_per_week_nano is not None:
                per_week = checked_usd_nano(self.usd_per_week_nano, "weekly dollar budget")
        elif self.action in ("unset", "unset_default"):
            if not isinstance(self.dimensions, tuple | list) or any(
                    d not in DIMENSIONS for d in self.dimensions):
                raise DeclarationError(f"dimensions {self.dimensions!r}: each one of "
                                       f"{', '.join(DIMENSIONS)}")
            dimensions = tuple(d for d in DIMENSIONS if d in self.dimensions)
        return Change(self.action, target, duration, tokens, usd, per_week, dimensions)

    @property
    def removed(self) -> tuple[str, ...]:
        """The dimensions an unset removes (all when it names none)."""
        return self.dimensions or DIMENSIONS

    @property
    def declared(self) -> tuple[str, ...]:
        """The dimensions a set declares."""
        values = (self.duration_ms, self.tokens, self.usd_nano, self.usd_per_week_nano)
        return tuple(d for d, v in zip(DIMENSIONS, values, strict=True) if v is not None)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "target": self.target, "duration_ms": self.duration_ms,
                "tokens": self.tokens, "usd_nano": self.usd_nano,
                "usd_per_week_nano": self.usd_per_week_nano,
                "dimensions": list(self.dimensions)}

    @classmethod
    def from_json(cls, payload: Any) -> Change:
        """From the server's wire form; raises DeclarationError for anything else."""
        if not isinstance(payload, dict) or not isinstance(payload.get("action"), str):
            raise DeclarationError('expected a JSON object {"action": ..., "target": ..., '
                                   '"duration_ms": ...}')
        dimensions = payload.get("dimensions") or ()
        if not isinstance(dimensions, list | tuple):
            raise DeclarationError("dimensions must be a list")
        return cls(payload["action"], payload.get("target"), payload.get("duration_ms"),
                   payload.get("tokens"), payload.get("usd_nano"),
                   payload.get("usd_per_week_nano"), tuple(dimensions)).checked()


@dataclass(frozen=True)
class Applied:
    """What a change did: whether anything changed, and how many runs (in how many traces) it
    marked for re-derivation."""

    change: Change
    changed: bool
    runs: int
    traces: int

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change.to_json(), "changed": self.changed, "runs": self.runs,
                "traces": self.traces}

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> Applied:
        change = payload["change"]
        return cls(Change(change["action"], change.get("target"), change.get("duration_ms"),
                          change.get("tokens"), change.get("usd_nano"),
                          change.get("usd_per_week_nano"),
                          tuple(change.get("dimensions") or ())),
                   bool(payload["changed"]), int(payload["runs"]), int(payload["traces"]))


@dataclass(frozen=True)
class Declaration:
    what: str  # budget or cap
    scope: str  # agent, default, step
    target: str | None  # the agent or step key; None for the default
    duration_ms: int | None  # a budget: None when only other dimensions are declared
    declared_at: str  # ISO 8601 UTC
    tokens: int | None = None
    usd_nano: int | None = None
    usd_per_week_nano: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def apply(con: duckdb.DuckDBPyConnection, change: Change) -> Applied:
    """Store `change` and mark the runs it affects, in one transaction of `con` (the process's
    writing connection). The caller then runs the derivation (or lets serve's run it)."""
    change = change.checked()
    con.begin()
    try:
        applied = _apply_in_transaction(con, change)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return applied


def _apply_in_transaction(con: duckdb.DuckDBPyConnection, change: Change) -> Applied:
    scope_agent = {"scope": "default", "agent": ""}
    if change.action in ("set", "unset"):
        scope_agent = {"scope": "agent", "agent": change.target}
    before = _current(con, change)
    if change.action in ("set", "set_default"):
        con.execute(_BUDGET_SET, {**scope_agent, "budget_ms": change.duration_ms,
                                  "tokens": change.tokens, "usd_nano": change.usd_nano,
                                  "usd_per_week_nano": change.usd_per_week_nano})
    elif change.action in ("unset", "unset_default"):
        _each(con, _BUDGET_UNSET, {**scope_agent, **{
            f"unset_{dimension}": dimension in change.removed for dimension in DIMENSIONS}})
    elif change.action == "cap":
        con.execute(_CAP_SET, {"step_key": change.target, "cap_ms": change.duration_ms})
    else:
        con.execute(_CAP_UNSET, {"step_key": change.target})
    after = _current(con, change)
    if before == after:  # nothing changed: no run's numbers move
        return Applied(change, False, 0, 0)
    if change.action in ("cap", "uncap"):
        con.execute(_AFFECTED_BY_CAP, {"step_key": change.target})
    else:
        # only the dimensions that changed re-measure their runs (a weekly budget is read by
        # the weekly report, never stored with a run)
        moved = {d: b != a for d, b, a in zip(DIMENSIONS, before or (None,) * 4,
                                               after or (None,) * 4, strict=True)}
        con.execute(_AFFECTED_BY_BUDGET, {**scope_agent, "time": moved["time"],
                                          "tokens": moved["tokens"], "usd": moved["usd"]})
    row = con.execute("SELECT count(*), coalesce(sum(runs), 0) FROM declared_affected"
                      ).fetchone()
    traces, runs = (int(row[0]), int(row[1])) if row else (0, 0)
    con.execute(_MARK_AFFECTED)
    con.execute("DROP TABLE declared_affected")
    return Applied(change, True, runs, traces)


def _each(con: duckdb.DuckDBPyConnection, text: str, parameters: dict[str, Any]) -> None:
    """Each statement of a file, with the parameters it names (DuckDB prepares one at a
    time)."""
    for statement in text.split(";\n"):
        names = set(DUCKDB_PARAMETER.findall(statement))
        con.execute(statement, {key: value for key, value in parameters.items()
                                if key in names})


def _current(con: duckdb.DuckDBPyConnection, change: Change) -> tuple[Any, ...] | None:
    """What is stored of the declaration the change concerns (None when nothing is): a cap's
    duration, or a budget's dimensions in the order of DIMENSIONS."""
    if change.action in ("cap", "uncap"):
        row = con.execute("SELECT cap_ms FROM declared_step_caps WHERE step_key = ?",
                          [change.target]).fetchone()
    else:
        scope = "agent" if change.action in ("set", "unset") else "default"
        row = con.execute("SELECT budget_ms, tokens, usd_nano, usd_per_week_nano "
                          "FROM declared_budgets WHERE scope = ? AND agent = ?",
                          [scope, change.target or ""]).fetchone()
    return None if row is None else tuple(row)


def declarations(con: duckdb.DuckDBPyConnection) -> list[Declaration]:
    """Every declared budget (the default first) and cap."""
    rows = con.execute(_LIST).fetchall()
    return [Declaration(what, scope, target, None if ms is None else int(ms),
                        declared_at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                        tokens, usd_nano, usd_per_week_nano)
            for what, scope, target, ms, declared_at, tokens, usd_nano, usd_per_week_nano
            in rows]
