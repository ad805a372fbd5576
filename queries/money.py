"""Dollars from the integer nano-dollars the store keeps (docs/metrics.md §11.3), exactly.

The store holds every amount as whole nano-dollars (10⁻⁹ USD), so that sums are integer sums.
A report turns them into `decimal.Decimal` dollars here, never into floats: a float would print
$0.1 + $0.2 as 0.30000000000000004 and lose nano-dollars past 2⁵³ of them ($9M). The text of
an amount has up to 9 decimals with trailing zeros trimmed (`0.0123`, `2`, `0`): what the CSV,
JSON and table forms of every report write (queries/render.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

NANO_DIGITS = 9


def dollars(nano: Any) -> Decimal | None:
    """Whole nano-dollars (an int, a numpy integer, or the text of one) as exact dollars;
    None for a missing value. A float is refused: it may already have lost nano-dollars."""
    if nano is None or nano is pd.NA:
        return None
    if isinstance(nano, float | np.floating):
        if np.isnan(nano):
            return None
        raise TypeError(f"nano-dollars must be whole numbers, not the float {nano!r}")
    if isinstance(nano, bool | np.bool_):
        raise TypeError("nano-dollars must be whole numbers, not a boolean")
    return Decimal(int(nano)).scaleb(-NANO_DIGITS)


def dollar_text(amount: Decimal) -> str:
    """`Decimal('0.012300000')` → `0.0123`; `2.000000000` → `2`; zero (of any sign) → `0`."""
    if amount == 0:
        return "0"
    return format(amount.normalize(), "f")


def with_dollars(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """`frame` with each named column of nano-dollars replaced by exact dollars (object
    columns of Decimal, None where the amount is undefined). Columns are kept in place."""
    out = frame.copy(deep=False)
    for column in columns:
        out[column] = pd.Series([dollars(value) for value in frame[column]],
                                index=frame.index, dtype=object)
    return out


__all__ = ["NANO_DIGITS", "dollar_text", "dollars", "with_dollars"]
