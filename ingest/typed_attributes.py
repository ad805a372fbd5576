"""The attributes SPEC.md computes with, copied into typed columns.

Agents send numbers as strings and strings in odd case; cast leniently here once so that every
query can compare plain typed columns. The raw value always stays in the attributes JSON.
"""

from __future__ import annotations

from collections.abc import Callable
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
    "budget.total_ms": ("budget_total_ms", as_int),
    "budget.deadline_unix_ms": ("budget_deadline_unix_ms", as_int),
    "budget.reserve_ms": ("budget_reserve_ms", as_int),
    "budget.run.outcome": ("budget_run_outcome", as_label),
    "budget.step.kind": ("budget_step_kind", as_label),
    "budget.step.name": ("budget_step_name", as_text),
    "budget.remaining_ms": ("budget_remaining_ms", as_int),
    "budget.cap_ms": ("budget_cap_ms", as_int),
    "budget.allocated_ms": ("budget_allocated_ms", as_int),
    "budget.outcome": ("budget_outcome", as_label),
    "budget.side_effect": ("budget_side_effect", as_label),
    "budget.effect_status": ("budget_effect_status", as_label),
    "budget.idempotency_key": ("budget_idempotency_key", as_text),
    "budget.attempt": ("budget_attempt", as_int),
    "budget.hedge": ("budget_hedge", as_bool),
    "budget.reconcile.result": ("budget_reconcile_result", as_label),
    "budget.cleanup_ms": ("budget_cleanup_ms", as_int),
    "gen_ai.operation.name": ("gen_ai_operation_name", as_label),
    "gen_ai.tool.name": ("gen_ai_tool_name", as_text),
    "gen_ai.request.model": ("gen_ai_request_model", as_text),
    "gen_ai.agent.name": ("gen_ai_agent_name", as_text),
    "http.response.status_code": ("http_response_status_code", as_int),
    "error.type": ("error_type", as_text),
}

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
