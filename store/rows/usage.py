"""Token usage and reported cost of a span, typed at ingest (docs/metrics.md §11.1, §11.3 step 1).

Each quantity has several spellings (OTel GenAI, its older names, OpenInference, OpenLLMetry, the
Vercel AI SDK, Logfire). The tables below list them in the order docs/metrics.md §11.1 reads them;
the first spelling with a valid value fills the quantity's one column, so that two spellings on
one span (the Vercel AI SDK writes `ai.usage.*` and `gen_ai.usage.*` side by side) count once.
An invalid value (negative, fractional, not a number, NaN, absurdly large) is as if absent: the
next spelling is read, and the attribute's name goes to `usage_ignored`, which the derivation
turns into a note on the trace. The span itself is always stored, with the raw value in its
attributes JSON.

These tables live in rows/ because ingest types with them; store/derive/conventions.py renders
both derivations' SQL from the same tables (the ClickHouse derivation reads the raw attributes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

# A count or a cost beyond this is no real call's: a token count above 10^12 (a million
# million tokens) is a unit mistake or garbage. Money is held as nano-dollars in 64 bits
# (9.2 * 10^9 USD at most), so a span's reported cost is bounded at 10^9 USD, and a run's sums
# stay in range (store/derive/sql/derive_cost.sql saturates them all the same).
MAX_TOKENS = 10**12
MAX_USD = 10**9
NANO = Decimal(10) ** 9

# docs/metrics.md §11.1: each quantity and its spellings, in reading order.
USAGE_SPELLINGS: dict[str, tuple[str, ...]] = {
    "usage_input": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                    "llm.token_count.prompt", "ai.usage.inputTokens", "ai.usage.promptTokens"),
    "usage_cache_read": ("gen_ai.usage.cache_read.input_tokens",
                         "gen_ai.usage.cache_read_input_tokens",
                         "llm.token_count.prompt_details.cache_read",
                         "ai.usage.inputTokenDetails.cacheReadTokens",
                         "ai.usage.cachedInputTokens"),
    "usage_cache_write": ("gen_ai.usage.cache_write.input_tokens",
                          "gen_ai.usage.cache_creation.input_tokens",
                          "gen_ai.usage.cache_creation_input_tokens",
                          "llm.token_count.prompt_details.cache_write",
                          "ai.usage.inputTokenDetails.cacheWriteTokens"),
    "usage_output": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                     "llm.token_count.completion", "ai.usage.outputTokens",
                     "ai.usage.completionTokens"),
    "usage_reasoning": ("gen_ai.usage.reasoning.output_tokens",
                        "llm.token_count.completion_details.reasoning",
                        "ai.usage.outputTokenDetails.reasoningTokens", "ai.usage.reasoningTokens"),
    # read only when input and output are both absent (the derivation decides)
    "usage_total": ("gen_ai.usage.total_tokens", "llm.usage.total_tokens",
                    "llm.token_count.total", "ai.usage.totalTokens"),
}

# docs/metrics.md §11.3 step 1: the reported cost, first present of these (USD). A candidate is
# one attribute, or the sum of the attributes of a group that are present (OpenInference's
# prompt and completion costs).
COST_AMOUNT = "gen_ai.usage.cost.amount"
COST_CURRENCY = "gen_ai.usage.cost.currency"
COST_CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("budget.cost_usd",), (COST_AMOUNT,), ("gen_ai.usage.cost",), ("llm.cost.total",),
    ("llm.cost.prompt", "llm.cost.completion"), ("operation.cost",))
COST_ATTRIBUTES: tuple[str, ...] = tuple(a for group in COST_CANDIDATES for a in group)
# the currency `gen_ai.usage.cost.amount` is in, when it says (absent or USD: taken)
USD = "usd"

# The budget.* attributes of docs/metrics.md §2 that carry tokens or dollars (one spelling each).
TOKEN_BUDGET = "budget.total_tokens"
USD_BUDGET = "budget.total_usd"


class Invalid:
    """A usage or cost value that is present but unusable: the quantity reads its next spelling,
    and the attribute's name is recorded in `usage_ignored`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "INVALID"


INVALID = Invalid()


def token_count(value: Any) -> int | Invalid:
    """A non-negative whole count up to MAX_TOKENS, from an int, a double or a string holding
    one ('1200', '1200.0', 1200.0); anything else (True, -1, 2.5, 'many', NaN) is INVALID."""
    if value.__class__ is int:
        return value if 0 <= value <= MAX_TOKENS else INVALID
    if isinstance(value, bool):
        return INVALID
    if isinstance(value, str):
        text = value.strip()
        try:
            return token_count(int(text))
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                return INVALID
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return INVALID
        return token_count(int(value))
    if isinstance(value, int):  # an int subclass other than bool
        return token_count(int(value))
    return INVALID


def usd_nano(value: Any) -> int | Invalid:
    """A finite amount of USD in [0, MAX_USD] as integer nano-dollars, rounded half to even
    once (0.0123 → 12300000); a double is read as its shortest decimal form, as the agent wrote
    it. Anything else (negative, NaN, 'free', True) is INVALID."""
    if isinstance(value, bool):
        return INVALID
    if isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            return INVALID
        amount = Decimal(repr(value))
    elif isinstance(value, str):
        try:
            amount = Decimal(value.strip())
        except InvalidOperation:
            return INVALID
        if not amount.is_finite():
            return INVALID
    else:
        return INVALID
    if amount < 0 or amount > MAX_USD:
        return INVALID
    return int((amount * NANO).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def as_label(value: Any) -> str | None:
    """As store/rows/typed_attributes.py types labels (a string, trimmed, lower-cased)."""
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip().lower()


# The provisional columns ingest fills, one per spelling (a leading `_`: never stored), and the
# attribute each stands for. merge_usage replaces them by the stored columns below.
def _provisional(prefix: str, attributes: tuple[str, ...]) -> dict[str, str]:
    return {f"_{prefix}_{rank}": attribute for rank, attribute in enumerate(attributes)}


USAGE_PROVISIONAL: dict[str, dict[str, str]] = {
    quantity: _provisional(quantity, spellings) for quantity, spellings in USAGE_SPELLINGS.items()}
COST_PROVISIONAL: dict[str, str] = _provisional("cost", COST_ATTRIBUTES)
CURRENCY_PROVISIONAL = "_cost_currency"
# attribute → (provisional column, cast), for typed_attributes.TYPED_ATTRIBUTES
PROVISIONAL_CASTS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    **{attribute: (column, token_count) for columns in USAGE_PROVISIONAL.values()
       for column, attribute in columns.items()},
    **{attribute: (column, usd_nano) for column, attribute in COST_PROVISIONAL.items()},
    COST_CURRENCY: (CURRENCY_PROVISIONAL, as_label),
    TOKEN_BUDGET: ("_budget_total_tokens", token_count),
    USD_BUDGET: ("_budget_total_usd", usd_nano),
}
PROVISIONAL_COLUMNS: frozenset[str] = frozenset(column for column, _ in PROVISIONAL_CASTS.values())
# The stored columns merge_usage fills (spans, store/file/schema/spans.sql).
USAGE_COLUMNS: tuple[str, ...] = (*USAGE_SPELLINGS, "cost_reported_nano", "usage_ignored",
                                  "budget_total_tokens", "budget_total_usd_nano")
# each provisional column → the stored column it is merged into
USAGE_MERGED_INTO: dict[str, str] = {
    **{column: quantity for quantity, columns in USAGE_PROVISIONAL.items() for column in columns},
    **{column: "cost_reported_nano" for column in (*COST_PROVISIONAL, CURRENCY_PROVISIONAL)},
    "_budget_total_tokens": "budget_total_tokens",
    "_budget_total_usd": "budget_total_usd_nano",
}
_COST_ATTRIBUTE_COLUMN = {attribute: column for column, attribute in COST_PROVISIONAL.items()}


# Each provisional column's part in the merge: (quantity or "cost", rank among its spellings,
# attribute), and every attribute's place in the order usage_ignored lists them (the tables'
# order, which store/file/schema_migrations/6_to_7.sql follows too).
_ROLE: dict[str, tuple[str, int, str]] = {
    **{column: (quantity, rank, attribute) for quantity, columns in USAGE_PROVISIONAL.items()
       for rank, (column, attribute) in enumerate(columns.items())},
    **{column: ("cost", 0, attribute) for column, attribute in COST_PROVISIONAL.items()},
    CURRENCY_PROVISIONAL: ("currency", 0, COST_CURRENCY),
    "_budget_total_tokens": ("budget_total_tokens", 0, TOKEN_BUDGET),
    "_budget_total_usd": ("budget_total_usd_nano", 0, USD_BUDGET),
}
_ORDER = {attribute: index for index, attribute in enumerate(
    [a for spellings in USAGE_SPELLINGS.values() for a in spellings] + list(COST_ATTRIBUTES)
    + [TOKEN_BUDGET, USD_BUDGET])}


def merge_usage(typed: dict[str, Any]) -> None:
    """Replace the provisional usage and cost columns of one span's typed values by the stored
    ones: each quantity from its first valid spelling, the first valid reported cost, and the
    names of the attributes whose values were ignored. Called only when the span has one; it
    looks only at the columns the span has (ingest's hot path: most have two to five)."""
    ignored: list[str] = []
    best: dict[str, tuple[int, int]] = {}  # quantity → (rank, value)
    costs: dict[str, Any] = {}
    currency = None
    for column in [column for column in typed if column in _ROLE]:
        value = typed.pop(column)
        quantity, rank, attribute = _ROLE[column]
        if quantity == "cost":
            costs[attribute] = value
        elif quantity == "currency":
            currency = value
        elif value is INVALID:
            ignored.append(attribute)
        elif value is not None and (quantity not in best or rank < best[quantity][0]):
            best[quantity] = (rank, value)
    for quantity, (_, value) in best.items():
        typed[quantity] = value
    if costs:
        if currency is not None and currency != USD and costs.get(COST_AMOUNT) is not None:
            costs[COST_AMOUNT] = INVALID  # another currency is not taken (§11.3)
        cost = None
        for group in COST_CANDIDATES:
            valid = []
            for attribute in group:
                value = costs.get(attribute)
                if value is INVALID:
                    ignored.append(attribute)
                elif value is not None:
                    valid.append(value)
            if cost is None and valid:
                cost = sum(valid)
        if cost is not None:
            typed["cost_reported_nano"] = cost
    if ignored:
        typed["usage_ignored"] = sorted(ignored, key=_ORDER.__getitem__)
