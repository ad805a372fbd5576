"""The attributes docs/metrics.md and docs/conventions.md compute with, copied into typed columns.

Agents send numbers as strings and strings in odd case; cast leniently here once so that every
query can compare plain typed columns. The raw value always stays in the attributes JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from store.rows.usage import (
    PROVISIONAL_CASTS,
    PROVISIONAL_COLUMNS,
    USAGE_COLUMNS,
    USAGE_MERGED_INTO,
    merge_usage,
)

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


# Bounds of the budget.* numbers (docs/storage.md, "Budget values and failed derivations").
# The derivation multiplies them by 10^6 into nanoseconds and adds them to span times in
# BIGINT: 2^62 ms, or a deadline in microseconds, overflowed it and stopped every derivation
# of the file. A year is far beyond any agent run we know of, and 10^6 times it is
# far inside BIGINT.
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


@dataclass(frozen=True)
class Bounded:
    """The cast of one budget.* number: an int in [low, high]; a float is rounded to the
    millisecond (JavaScript agents send doubles), unless `whole` (a count) asks for an
    integer; anything else is a RefusedValue naming the problem."""

    key: str
    low: int
    high: int
    whole: bool = False
    unit: str = "ms"
    hint: Callable[[float], str] = lambda _: ""

    def __call__(self, value: Any) -> int | RefusedValue:
        key = self.key
        number = _number(key, value)
        if isinstance(number, RefusedValue):
            return number
        if isinstance(number, float):
            if self.whole and not number.is_integer():
                return RefusedValue("budget_not_a_number",
                                    f"{key} {number!r} is not a whole number")
            number = round(number)
        if not self.low <= number <= self.high:
            shown = str(number) if abs(number) < 10**30 else f"{number:.3e}"
            return RefusedValue(
                "budget_out_of_range", f"{key} {shown} is out of range ({self.low:,} to "
                f"{self.high:,} {self.unit}){self.hint(number)}")
        return number



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


def as_url_host(value: Any) -> str | None:
    """The host of a URL (url.full, http.url), lower-cased as urlsplit gives it: a step's default
    name (docs/conventions.md row 12), never the URL itself, whose query may hold secrets."""
    text = as_text(value)
    if not text:
        return None
    try:
        host = urlsplit(text.strip()).hostname
    except ValueError:
        return None
    return host or None


def as_json_model(value: Any) -> str | None:
    """The `model` key of a JSON object given as text (llm.invocation_parameters,
    docs/conventions.md row 4); None when the text is no JSON object or the key is absent or
    empty."""
    if isinstance(value, dict):
        parsed: Any = value
    else:
        text = as_text(value)
        if not text or "model" not in text:
            return None
        try:
            parsed = json.loads(text)
        except ValueError:
            return None
    model = parsed.get("model") if isinstance(parsed, dict) else None
    return as_text(model) or None


# A tool's result text can be a whole payload (OpenInference sets output.value on every span); the
# only rule that reads it (docs/metrics.md §3 rule 4, the OpenAI Agents SDK's "Tool '…' timed out
# …", store/derive/conventions.py) looks at its start, so only the start of a result that begins so
# is typed: the column stays NULL for every other span instead of copying payloads.
RESULT_HEAD_CHARS = 256
TOOL_RESULT_PREFIX = "Tool '"


def as_text_head(value: Any) -> str | None:
    if not isinstance(value, str) or not value.startswith(TOOL_RESULT_PREFIX):
        return None
    return value[:RESULT_HEAD_CHARS]


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
    "budget.total_ms": ("budget_total_ms", Bounded("budget.total_ms", 1, MAX_BUDGET_MS)),
    "budget.deadline_unix_ms": ("budget_deadline_unix_ms", Bounded(
        "budget.deadline_unix_ms", MIN_DEADLINE_UNIX_MS, MAX_DEADLINE_UNIX_MS,
        unit="ms since the epoch: 2000-01-01 to 2200-01-01", hint=_unit_hint)),
    "budget.reserve_ms": ("budget_reserve_ms", Bounded("budget.reserve_ms", 0, MAX_BUDGET_MS)),
    "budget.run.outcome": ("budget_run_outcome", as_label),
    "budget.step.kind": ("budget_step_kind", as_label),
    "budget.step.name": ("budget_step_name", as_text),
    # Negative: the step started after the deadline had passed.
    "budget.remaining_ms": ("budget_remaining_ms", Bounded(
        "budget.remaining_ms", -MAX_BUDGET_MS, MAX_BUDGET_MS)),
    "budget.cap_ms": ("budget_cap_ms", Bounded("budget.cap_ms", 0, MAX_BUDGET_MS)),
    "budget.allocated_ms": ("budget_allocated_ms", Bounded(
        "budget.allocated_ms", 0, MAX_BUDGET_MS)),
    "budget.outcome": ("budget_outcome", as_label),
    "budget.side_effect": ("budget_side_effect", as_label),
    "budget.effect_status": ("budget_effect_status", as_label),
    "budget.idempotency_key": ("budget_idempotency_key", as_text),
    "budget.attempt": ("budget_attempt", Bounded("budget.attempt", 1, MAX_ATTEMPT, whole=True,
                                                 unit="attempts")),
    "budget.hedge": ("budget_hedge", as_bool),
    "budget.reconcile.result": ("budget_reconcile_result", as_label),
    "budget.cleanup_ms": ("budget_cleanup_ms", Bounded("budget.cleanup_ms", 0, MAX_BUDGET_MS)),
    "gen_ai.operation.name": ("gen_ai_operation_name", as_label),
    "gen_ai.tool.name": ("gen_ai_tool_name", as_text),
    "gen_ai.request.model": ("gen_ai_request_model", as_text),
    "gen_ai.agent.name": ("gen_ai_agent_name", as_text),
    "error.type": ("error_type", as_text),
    # Read by the recognition rules of docs/conventions.md (store/derive/conventions.py names them
    # by attribute).
    "gen_ai.response.model": ("gen_ai_response_model", as_text),
    "gen_ai.data_source.id": ("gen_ai_data_source_id", as_text),
    "gen_ai.provider.name": ("gen_ai_provider_name", as_text),
    "gen_ai.system": ("gen_ai_system", as_text),
    "openinference.span.kind": ("openinference_span_kind", as_label),
    "llm.model_name": ("llm_model_name", as_text),
    "embedding.model_name": ("embedding_model_name", as_text),
    "reranker.model_name": ("reranker_model_name", as_text),
    "llm.invocation_parameters": ("llm_invocation_model", as_json_model),
    "tool.name": ("tool_name", as_text),
    "agent.name": ("agent_name", as_text),
    "graph.node.id": ("graph_node_id", as_text),
    "traceloop.span.kind": ("traceloop_span_kind", as_label),
    "traceloop.entity.name": ("traceloop_entity_name", as_text),
    "llm.request.type": ("llm_request_type", as_label),
    "ai.operationId": ("ai_operation_id", as_label),
    "ai.toolCall.name": ("ai_tool_call_name", as_text),
    "ai.model.id": ("ai_model_id", as_text),
    "http.request.method": ("http_request_method", as_text),
    "http.method": ("http_method", as_text),
    "rpc.system": ("rpc_system", as_text),
    "rpc.service": ("rpc_service", as_text),
    "rpc.method": ("rpc_method", as_text),
    "server.address": ("server_address", as_text),
    "net.peer.name": ("net_peer_name", as_text),
    "url.full": ("url_full_host", as_url_host),
    "http.url": ("http_url_host", as_url_host),
    "url.template": ("url_template", as_text),
    "http.route": ("http_route", as_text),
    # an MCP client's call (docs/conventions.md row 3: `tools/call`)
    "mcp.method.name": ("mcp_method_name", as_label),
    "output.value": ("output_value_head", as_text_head),
    "gen_ai.tool.call.result": ("gen_ai_tool_call_result_head", as_text_head),
    # docs/metrics.md §11 (schema 7): what a span's tokens and cost are read from
    # (store/rows/usage.py: each quantity's spellings, merged into one column), the budgets
    # a run states in tokens and dollars, and what prices a span (its model and provider).
    "budget.usage.input_includes_cache": ("usage_input_includes_cache", as_bool),
    "budget.refused_by": ("budget_refused_by", as_label),
    "budget.run.exhausted_by": ("budget_run_exhausted_by", as_label),
    "ai.response.model": ("ai_response_model", as_text),
    "llm.provider": ("llm_provider", as_text),
    "ai.model.provider": ("ai_model_provider", as_text),
    **PROVISIONAL_CASTS,
}

# The budget.* numbers and their bounds: what the fuzz tests drive with hostile values.
BUDGET_BOUNDS: dict[str, tuple[int, int]] = {
    key: (cast.low, cast.high) for key, (_, cast) in TYPED_ATTRIBUTES.items()
    if isinstance(cast, Bounded)}
BUDGET_NUMBER_KEYS: tuple[str, ...] = tuple(BUDGET_BOUNDS)

# A status under several names, most trusted first: the gRPC status (docs/metrics.md §3 rule 3) and
# the HTTP status (rule 2: http.response.status_code, or the older http.status_code). Each name gets
# a provisional column; merge_named_columns keeps the most trusted one present.
GRPC_STATUS_KEYS = ("rpc.grpc.status_code", "rpc.response.status_code", "rpc.status_code")
HTTP_STATUS_KEYS = ("http.response.status_code", "http.status_code")
MERGED_COLUMNS: dict[str, tuple[str, ...]] = {}
for _merged, _keys, _cast in (("grpc_status_code", GRPC_STATUS_KEYS, as_grpc_code),
                              ("http_response_status_code", HTTP_STATUS_KEYS, as_int)):
    _provisional = tuple(f"_{_merged}_{rank}" for rank in range(len(_keys)))
    MERGED_COLUMNS[_merged] = _provisional
    for _key, _column in zip(_keys, _provisional, strict=True):
        TYPED_ATTRIBUTES[_key] = (_column, _cast)
_STATUS_PROVISIONAL = frozenset(column for columns in MERGED_COLUMNS.values()
                                for column in columns)
_PROVISIONAL = _STATUS_PROVISIONAL | PROVISIONAL_COLUMNS

# The convention columns of docs/conventions.md (from gen_ai.response.model on): most spans carry
# none of them, so a batch keeps them sparse, one dict per span (ingest/decode/flatten.py), and the
# writer hands DuckDB only those some span of the batch has (the others are NULL by default).
_KEYS = list(TYPED_ATTRIBUTES)
CONVENTION_COLUMNS: frozenset[str] = frozenset(
    TYPED_ATTRIBUTES[key][0] for key in _KEYS[_KEYS.index("gen_ai.response.model"):]
    if not TYPED_ATTRIBUTES[key][0].startswith("_")) | frozenset(USAGE_COLUMNS)

TYPED_COLUMNS: tuple[str, ...] = tuple(
    column for column, _ in TYPED_ATTRIBUTES.values() if column not in _PROVISIONAL
) + tuple(MERGED_COLUMNS) + USAGE_COLUMNS
# The stored column each provisional one is merged into (for the tests that follow an
# attribute to the SQL that reads it).
MERGED_INTO: dict[str, str] = {
    **{column: merged for merged, columns in MERGED_COLUMNS.items() for column in columns},
    **USAGE_MERGED_INTO}


def merge_named_columns(typed: dict[str, Any]) -> None:
    """Replace the provisional columns of each merged one by the one trusted most, and the
    usage and cost spellings by their quantities (store/rows/usage.py)."""
    if _PROVISIONAL.isdisjoint(typed):
        return  # most spans: no HTTP or gRPC status, no usage at all
    if not PROVISIONAL_COLUMNS.isdisjoint(typed):
        merge_usage(typed)
        if _STATUS_PROVISIONAL.isdisjoint(typed):
            return
    for merged, provisional in MERGED_COLUMNS.items():
        value = None
        for column in provisional:
            found = typed.pop(column, None)
            if value is None and found is not None:
                value = found
        if value is not None:
            typed[merged] = value
