"""What a model call costs: a `Price` per million tokens, and money as integers.

Money is counted as budgetscope counts it (its docs/metrics.md §11.3): integer nano-dollars
(10⁻⁹ USD), a rate as integer pico-dollars per million tokens, and a call's cost rounded half to
even once. A step's `budget.cost_usd` is then exactly the cost budgetscope computes from the
same tokens at the same prices, to the nano-dollar, and a run's ledger never drifts the way a
sum of floats does."""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

NANO_PER_USD = 10**9
# A rate in pico-USD per million tokens times a token count is in atto-dollars (10⁻¹⁸ USD).
ATTO_PER_NANO = 10**9
_PICO = Decimal(10**12)


def _rate(value: Any, what: str) -> int:
    """A rate in USD per million tokens as integer pico-USD per million tokens (exact for up to
    12 decimals). Refuses what is not a finite number at least 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise ValueError(f"the {what} rate must be a number of USD per million tokens, "
                         f"got {value!r}")
    try:
        exact = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"the {what} rate must be a number, got {value!r}") from None
    if not exact.is_finite() or exact < 0:
        raise ValueError(f"the {what} rate must be a finite number at least 0 (USD per "
                         f"million tokens), got {value!r}")
    return int((exact * _PICO).to_integral_value())


def usd_to_nano(value: Any, what: str) -> int:
    """A dollar amount given by the agent (a budget, a reserve, an estimate) as nano-dollars;
    a ValueError naming `what` when it is not a finite number at least 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise ValueError(f"{what} must be a number of US dollars, got {value!r}")
    try:
        exact = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"{what} must be a number of US dollars, got {value!r}") from None
    if not exact.is_finite() or exact < 0:
        raise ValueError(f"{what} must be a finite number of US dollars at least 0, "
                         f"got {value!r}")
    return int((exact * NANO_PER_USD).to_integral_value())


def reported_usd_to_nano(value: Any) -> int | None:
    """A cost someone else reported (a provider, a framework): nano-dollars, or None when it
    is not a finite number at least 0 (never raises)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value < 0 or value > 10**9:
        return None
    return round_half_even(int(Decimal(str(value)) * 10**18), ATTO_PER_NANO)


def round_half_even(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded half to even, in integers (numerator ≥ 0)."""
    quotient, rest = divmod(numerator, denominator)
    if 2 * rest > denominator or (2 * rest == denominator and quotient % 2 == 1):
        quotient += 1
    return quotient


def ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def nano_to_usd(nano: int) -> float:
    """For an attribute: the nearest double, which reads back as the same nano-dollars."""
    return nano / NANO_PER_USD


def format_usd(nano: int) -> str:
    """Dollars with up to 9 decimals, trailing zeros trimmed (budgetscope's reports)."""
    whole, fraction = divmod(nano, NANO_PER_USD)
    text = f"{whole}.{fraction:09d}".rstrip("0").rstrip(".")
    return f"${text}"


class Price:
    """What a model charges, in US dollars per million tokens:
    `Price(input=2.5, output=10, cache_read=1.25, cache_write=3.125)`. A cache rate left out is
    charged at the input rate (as budgetscope prices it); reasoning tokens are charged at the
    output rate. A rate that is negative, NaN, infinite or not a number is a ValueError."""

    __slots__ = ("cache_read", "cache_read_pico", "cache_write", "cache_write_pico", "input",
                 "input_pico", "output", "output_pico")

    def __init__(self, *, input: float, output: float,  # noqa: A002 - the rate's own name
                 cache_read: float | None = None, cache_write: float | None = None) -> None:
        self.input_pico = _rate(input, "input")
        self.output_pico = _rate(output, "output")
        self.cache_read_pico = self.input_pico if cache_read is None else _rate(
            cache_read, "cache_read")
        self.cache_write_pico = self.input_pico if cache_write is None else _rate(
            cache_write, "cache_write")
        self.input, self.output = input, output
        self.cache_read, self.cache_write = cache_read, cache_write

    def __repr__(self) -> str:
        return (f"Price(input={self.input!r}, output={self.output!r}, "
                f"cache_read={self.cache_read!r}, cache_write={self.cache_write!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Price):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[int, int, int, int]:
        return (self.input_pico, self.output_pico, self.cache_read_pico, self.cache_write_pico)
