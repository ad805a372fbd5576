"""The attributes SPEC.md computes with, copied into typed columns.

Agents send numbers as strings and strings in odd case; cast leniently here once so that every
query can compare plain typed columns. The raw value always stays in the attributes JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# gRPC status names → codes, for rpc.response.status_code / rpc.status_code (string-valued).
GRPC_STATUS_CODES: dict[str, int] = {
    "OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12,
    "INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**63 else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return as_int(number)
    return None


@dataclass(frozen=True)
class RefusedValue:
    """A budget.* number that is present but unusable: the typed column stays empty and the
    flattener reports `reason` (counted like a rejection; the span itself is kept)."""

    reason: str  # budget_not_a_number or budget_out_of_range
    problem: str  # one sentence naming the attribute, the value and the accepted range


# Bounds of the budget.* numbers (README, "Budget values"). The derivation multiplies them
# by 10^6 into nanoseconds and adds them to span times in BIGINT: 2^62 ms, or a deadline in
# microseconds, overflowed it and stopped every derivation of the file (issue 14). A year is
# far beyond any agent run we know of, and 10^6 times it is far inside BIGINT.
MAX_BUDGET_MS = 366 * 24 * 3600 * 1000
# Absolute deadlines: 2000-01-01 up to (not including) 2200-01-01, in epoch milliseconds. A
# deadline sent in seconds falls below, one in microseconds or nanoseconds far above.
MIN_DEADLINE_UNIX_MS = 946_684_800_000
MAX_DEADLINE_UNIX_MS = 7_258_118_400_000
MAX_ATTEMPT = 1_000_000


def _number(key: str, value: Any) -> float | int | RefusedValue:
    """An int, or a finite float, from an int, a float or a decimal string; else refused."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return RefusedValue("budget_not_a_number",
                            f"{key} is a {type(value).__name__}, not a number")
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            value = float(text)
        except ValueError:
            return RefusedValue("budget_not_a_number", f"{key} {value[:40]!r} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        return RefusedValue("budget_not_a_number", f"{key} {value} is not a finite number")
    return value


def _unit_hint(value: float) -> str:
    if value >= 1e17:
        return " (it looks like nanoseconds)"
    if value >= 1e14:
        return " (it looks like microseconds)"
    if 1e8 <= value < 1e11:
        return " (it looks like seconds)"
    return ""


def bounded(key: str, low: int, high: int, *, whole: bool = False, unit: str = "ms",
            hint: Callable[[float], str] = lambda _: "") -> Callable[[Any], Any]:
    """The cast of one budget.* number: an int in [low, high]; a float is rounded to the
    millisecond (JavaScript agents send doubles), unless `whole` (a count) asks for an
    integer; anything else is a RefusedValue naming the problem."""

    def cast(value: Any) -> int | RefusedValue:
        number = _number(key, value)
        if isinstance(number, RefusedValue):
            return number
        if isinstance(number, float):
            if whole and not number.is_integer():
                return RefusedValue("budget_not_a_number",
                                    f"{key} {number!r} is not a whole number")
            number = round(number)
        if not low <= number <= high:
            shown = str(number) if abs(number) < 10**30 else f"{number:.3e}"
            return RefusedValue(
                "budget_out_of_range",
                f"{key} {shown} is out of range ({low:,} to {high:,} {unit}){hint(number)}")
        return number

    return cast


def as_text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def as_label(value: Any) -> str | None:
    """An enumerated value such as budget.outcome: compared case-insensitively."""
    text = as_text(value)
    return text.strip().lower() if text is not None else None


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
    return None


def as_grpc_code(value: Any) -> int | None:
    if isinstance(value, str) and value.strip().upper() in GRPC_STATUS_CODES:
        return GRPC_STATUS_CODES[value.strip().upper()]
    code = as_int(value)
    # The column is INTEGER; a code outside it is no gRPC status (the raw value stays in
    # the attributes JSON).
    return code if code is not None and -(2**31) <= code < 2**31 else None


# attribute key → (column, cast). Listed in one table so the schema, the flattener and the
# tests agree on what is typed.
TYPED_ATTRIBUTES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "budget.total_ms": ("budget_total_ms", bounded("budget.total_ms", 1, MAX_BUDGET_MS)),
    "budget.deadline_unix_ms": ("budget_deadline_unix_ms", bounded(
        "budget.deadline_unix_ms", MIN_DEADLINE_UNIX_MS, MAX_DEADLINE_UNIX_MS,
        unit="ms since the epoch: 2000-01-01 to 2200-01-01", hint=_unit_hint)),
    "budget.reserve_ms": ("budget_reserve_ms", bounded("budget.reserve_ms", 0, MAX_BUDGET_MS)),
    "budget.run.outcome": ("budget_run_outcome", as_label),
    "budget.step.kind": ("budget_step_kind", as_label),
    "budget.step.name": ("budget_step_name", as_text),
    # Negative: the step started after the deadline had passed.
    "budget.remaining_ms": ("budget_remaining_ms", bounded(
        "budget.remaining_ms", -MAX_BUDGET_MS, MAX_BUDGET_MS)),
    "budget.cap_ms": ("budget_cap_ms", bounded("budget.cap_ms", 0, MAX_BUDGET_MS)),
    "budget.allocated_ms": ("budget_allocated_ms", bounded(
        "budget.allocated_ms", 0, MAX_BUDGET_MS)),
    "budget.outcome": ("budget_outcome", as_label),
    "budget.side_effect": ("budget_side_effect", as_label),
    "budget.effect_status": ("budget_effect_status", as_label),
    "budget.idempotency_key": ("budget_idempotency_key", as_text),
    "budget.attempt": ("budget_attempt", bounded("budget.attempt", 1, MAX_ATTEMPT, whole=True,
                                                 unit="attempts")),
    "budget.hedge": ("budget_hedge", as_bool),
    "budget.reconcile.result": ("budget_reconcile_result", as_label),
    "budget.cleanup_ms": ("budget_cleanup_ms", bounded("budget.cleanup_ms", 0, MAX_BUDGET_MS)),
    "gen_ai.operation.name": ("gen_ai_operation_name", as_label),
    "gen_ai.tool.name": ("gen_ai_tool_name", as_text),
    "gen_ai.request.model": ("gen_ai_request_model", as_text),
    "gen_ai.agent.name": ("gen_ai_agent_name", as_text),
    "http.response.status_code": ("http_response_status_code", as_int),
    "error.type": ("error_type", as_text),
}

# The budget.* numbers (bounded casts above): what the fuzz tests drive with hostile values.
BUDGET_NUMBER_KEYS: tuple[str, ...] = (
    "budget.total_ms", "budget.deadline_unix_ms", "budget.reserve_ms", "budget.remaining_ms",
    "budget.cap_ms", "budget.allocated_ms", "budget.attempt", "budget.cleanup_ms")

# The gRPC status under its three names, most trusted first (SPEC §3 rule 3). Each name gets a
# provisional column; pick_grpc_status keeps the most trusted one present.
GRPC_STATUS_KEYS = ("rpc.grpc.status_code", "rpc.response.status_code", "rpc.status_code")
_GRPC_PROVISIONAL = tuple(f"_grpc_status_{rank}" for rank in range(len(GRPC_STATUS_KEYS)))
for _key, _column in zip(GRPC_STATUS_KEYS, _GRPC_PROVISIONAL, strict=True):
    TYPED_ATTRIBUTES[_key] = (_column, as_grpc_code)

TYPED_COLUMNS: tuple[str, ...] = tuple(
    column for column, _ in TYPED_ATTRIBUTES.values() if column not in _GRPC_PROVISIONAL
) + ("grpc_status_code",)


def pick_grpc_status(typed: dict[str, Any]) -> None:
    """Replace the provisional gRPC columns by the one trusted most."""
    code = None
    for column in _GRPC_PROVISIONAL:
        value = typed.pop(column, None)
        if code is None and value is not None:
            code = value
    if code is not None:
        typed["grpc_status_code"] = code
