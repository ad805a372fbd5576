"""Dollars from the integer nano-dollars the store keeps (docs/metrics.md §11.3), exactly.

The store holds every amount as whole nano-dollars (10⁻⁹ USD), so that sums are integer sums.
A report turns them into `decimal.Decimal` dollars here, never into floats: a float would print
$0.1 + $0.2 as 0.30000000000000004 and lose nano-dollars past 2⁵³ of them ($9M). The text of
an amount has up to 9 decimals with trailing zeros trimmed (`0.0123`, `2`, `0`): what the CSV,
JSON and table forms of every report write (queries/render.py).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from decimal import Context, Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

NANO_DIGITS = 9
# Enough digits for any HUGEINT (39) scaled exactly: the default context keeps 28, and a sum of
# amounts handed over as text may have more.
_EXACT = Context(prec=60)


def dollars(nano: Any) -> Decimal | None:
    """Whole nano-dollars (an int, a numpy integer, or the text of one) as exact dollars;
    None for a missing value. A float is refused: it may already have lost nano-dollars."""
    if nano is None or nano is pd.NA:
        return None
    if isinstance(nano, float | np.floating):
        if np.isnan(nano):
            return None
        raise TypeError(f"nano-dollars must be whole numbers, not the float {nano!r}")
    return _scaled(_whole(nano))


def dollar_text(amount: Decimal) -> str:
    """`Decimal('0.012300000')` → `0.0123`; `2.000000000` → `2`; zero (of any sign) → `0`."""
    if amount == 0:
        return "0"
    # exact, in the amount's own exponent: 0.510000000. str() writes the same digits, twice
    # as fast, except in exponent form (below a millionth, or a positive exponent).
    text = str(amount)
    if "E" in text:
        text = format(amount, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def with_dollars(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """`frame` with each named column of nano-dollars (integers, or the decimal text of a
    HUGEINT sum) replaced by exact dollars (object columns of Decimal, None where the amount
    is undefined). Columns are kept in place."""
    out = frame.copy(deep=False)
    for column in columns:
        out[column] = pd.Series(_column_dollars(frame[column]), index=frame.index,
                                dtype=object)
    return out


def _scaled(nano: int) -> Decimal:
    return Decimal(nano).scaleb(-NANO_DIGITS, _EXACT)


def _whole(nano: Any) -> int:
    """An integer, a numpy integer, or the decimal text of one (a HUGEINT sum), as an int."""
    if type(nano) is int:
        return nano
    if isinstance(nano, np.integer):
        return int(nano)
    if isinstance(nano, str):
        return int(nano)  # ValueError for anything but a whole number's text
    raise TypeError(f"nano-dollars must be whole numbers, not {type(nano).__name__} {nano!r}")


def _column_dollars(values: pd.Series) -> np.ndarray:
    """`dollars` of each value, made for a whole column at a time: a report of 50,000 runs
    has a few such columns, and one call of `dollars` a value took 2.4 µs. Each distinct
    amount is made once (budgets and zeros repeat; pd.factorize finds them in about 1 ms), an
    integer column's through Arrow (_integer_dollars), text (a HUGEINT sum) value by value."""
    if pd.api.types.is_float_dtype(values.dtype) or pd.api.types.is_bool_dtype(values.dtype):
        if values.notna().any():
            raise TypeError(f"nano-dollars must be whole numbers, not {values.dtype}")
        return np.full(len(values), None, dtype=object)
    codes, distinct = pd.factorize(values, use_na_sentinel=True)
    if pd.api.types.is_integer_dtype(values.dtype) and sys.byteorder == "little":
        made = _integer_dollars(np.asarray(distinct, dtype=np.int64))
    else:
        made = [_scaled(_whole(value)) for value in distinct]
    # a missing value's code, -1, takes the last element: None
    return np.take(np.array([*made, None], dtype=object), codes)


def _integer_dollars(nanos: np.ndarray) -> np.ndarray:
    """64-bit integers of nano-dollars as Decimal dollars, by Arrow: each, sign-extended to
    128 bits, is the unscaled value of a decimal128 of scale 9 (so exactly n × 10⁻⁹), and
    Arrow makes the Decimal objects in C++: 44,000 distinct amounts in 13 ms of CPU, where
    building each Decimal in Python took 60-76 ms."""
    words = np.empty((len(nanos), 2), dtype=np.int64)  # little-endian: the low word first
    words[:, 0] = nanos
    words[:, 1] = nanos >> 63  # the sign, extended
    decimals = pa.Array.from_buffers(pa.decimal128(38, NANO_DIGITS), len(nanos),
                                     [None, pa.py_buffer(words)])
    return decimals.to_numpy(zero_copy_only=False)  # to_pylist() takes twice as long


__all__ = ["NANO_DIGITS", "dollar_text", "dollars", "with_dollars"]
