"""The CSV writer makes its fields a column at a time (queries/render.py); its bytes are, by
definition, those of the cell-at-a-time rules (`csv_text`, then RFC 4180 quoting, over the
values `itertuples` gives): the two are compared here on frames of every dtype the
reports hand over, with the values that test those rules (formulas, quotes, line ends, NaN, -0,
floats at the edge of a rounding, huge floats, dollars, missing values of each kind)."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from queries.money import with_dollars
from queries.render import csv_chunks, csv_text, to_csv_bytes


def _field(text: str) -> str:
    """RFC 4180: a field holding a comma, a quote or a line end is quoted, quotes doubled."""
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n\r') else text


def _line(fields: list[str]) -> str:
    return '""\n' if fields == [""] else ",".join(map(_field, fields)) + "\n"


def cell_at_a_time(frame: pd.DataFrame) -> bytes:
    """The definition: each row's cells through csv_text (the cell rules: types, decimals,
    formulas), then quoted, a row at a time as itertuples gives them."""
    columns = [str(c) for c in frame.columns]
    lines = [_line([csv_text(c, "") for c in columns])]
    lines.extend(_line([csv_text(value, column)
                        for value, column in zip(row, columns, strict=True)])
                 for row in frame.itertuples(index=False, name=None))
    return "".join(lines).encode("utf-8")


TEXTS = st.one_of(
    st.sampled_from(["", "=HYPERLINK(\"x\")", "+1", "-1", "@sum", "\tx", "\rx", "a,b", 'say "hi"',
                     "line\nbreak", "cr\ronly", "tool:search", "#3 model:gpt-4o", "é ünïcode",
                     "'quoted", " lead", "x\x00y"]),
    st.text(max_size=12))
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, -1e-9, 1e-9, 0.0000005, -0.0000005, 0.0005, -0.0005, 2.5e-7,
                     0.1 + 0.2, 1 / 3, 2.0**33, -(2.0**33), 2.0**33 + 2.0**-19,
                     8589934591.9999995, 1e15 + 0.3, 1e300, 5e-324]),
    st.integers(-10**12, 10**12).map(lambda n: n / 10**7))
NANOS = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1),
                  st.sampled_from([0, 1, 12_300_000, 2_000_000_000, -10_000_000]))


@st.composite
def frames(draw: st.DrawFn) -> pd.DataFrame:
    rows = draw(st.integers(0, 12))
    columns: dict[str, pd.Series] = {}

    def some(strategy: st.SearchStrategy) -> list:
        return draw(st.lists(strategy, min_size=rows, max_size=rows))

    kinds = draw(st.lists(st.sampled_from([
        "int64", "int32", "uint64", "Int64", "Int32", "float", "float_ms", "Float64", "bool",
        "boolean", "str", "object", "dollars", "datetime"]), min_size=1, max_size=7))
    for n, kind in enumerate(kinds):
        name = f"c{n}_ms" if kind == "float_ms" else f"c{n}"
        if kind in ("int64", "int32"):
            bits = 63 if kind == "int64" else 31
            values = pd.Series(some(st.integers(-(2**bits), 2**bits - 1)), dtype=kind)
        elif kind == "uint64":
            values = pd.Series(some(st.integers(0, 2**64 - 1)), dtype="uint64")
        elif kind in ("Int64", "Int32"):
            values = pd.Series(some(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1))),
                               dtype=kind)
        elif kind in ("float", "float_ms"):
            values = pd.Series(some(FLOATS), dtype="float64")
        elif kind == "Float64":
            values = pd.Series(some(st.one_of(st.none(), FLOATS.filter(math.isfinite))),
                               dtype="Float64")
        elif kind == "bool":
            values = pd.Series(some(st.booleans()), dtype=bool)
        elif kind == "boolean":
            values = pd.Series(some(st.one_of(st.none(), st.booleans())), dtype="boolean")
        elif kind == "str":
            values = pd.Series(some(st.one_of(st.none(), TEXTS)), dtype="str")
        elif kind == "object":
            values = pd.Series(some(st.one_of(
                st.none(), TEXTS, st.integers(), st.booleans(), FLOATS,
                st.decimals(allow_nan=False, allow_infinity=False, places=9),
                st.just(np.int64(-7)), st.just(np.float64(-0.0)), st.just(pd.NA))),
                dtype=object)
        elif kind == "dollars":  # what a report hands over: queries/money.py's Decimals
            values = with_dollars(pd.DataFrame({"x": pd.Series(some(NANOS), dtype="Int64")}),
                                  ["x"])["x"]
        else:
            values = pd.Series(pd.to_datetime(some(st.integers(0, 2**40)), unit="s"))
        columns[name] = values.reset_index(drop=True)
    return pd.DataFrame(columns)


@settings(max_examples=300, deadline=None)
@given(frames())
def test_a_column_at_a_time_is_the_cell_at_a_time_definition(frame: pd.DataFrame) -> None:
    assert to_csv_bytes(frame) == cell_at_a_time(frame)


@settings(max_examples=50, deadline=None)
@given(frames(), st.integers(1, 5))
def test_pieces_joined_are_the_whole(frame: pd.DataFrame, size: int) -> None:
    pieces = [frame.iloc[i:i + size] for i in range(0, len(frame), size)] or [frame]
    assert b"".join(csv_chunks(pieces)) == cell_at_a_time(frame)


def test_one_column_and_no_column() -> None:
    one = pd.DataFrame({"x": pd.Series(["", None, "a"], dtype="str")})
    assert to_csv_bytes(one) == cell_at_a_time(one) == b'x\n""\n""\na\n'
    assert to_csv_bytes(pd.DataFrame(index=range(2))) == b"\n\n\n"


def test_the_rules_each_column_kind_follows() -> None:
    frame = pd.DataFrame({
        "name": pd.Series(["=cmd()", 'a "b", c', None, "-1"], dtype="str"),
        "share": [0.1 + 0.2, -1e-9, float("nan"), 2.0**40 + 0.5],
        "wait_ms": [1.0005, -0.0, 2.5, float("inf")],
        "count": pd.Series([1, None, -3, 2**40], dtype="Int64"),
        "cost_usd": [Decimal("0.012300000"), None, Decimal("2.000000000"), Decimal("-0E-9")],
        "ok": pd.Series([True, None, False, True], dtype="boolean"),
    })
    assert to_csv_bytes(frame) == cell_at_a_time(frame) == (
        b"name,share,wait_ms,count,cost_usd,ok\n"
        b"'=cmd(),0.300000,1.000,1,0.0123,true\n"
        b'"a ""b"", c",0.000000,0.000,,,\n'
        b",,2.500,-3,2,false\n"
        b"'-1,1099511627776.500000,inf,1099511627776,0,true\n")


@settings(max_examples=2000, deadline=None)
@given(st.lists(FLOATS, min_size=1, max_size=20))
def test_a_float_is_written_as_rounding_it_first_writes_it(values: list[float]) -> None:
    frame = pd.DataFrame({"share": values, "elapsed_ms": values})
    assert to_csv_bytes(frame) == cell_at_a_time(frame)
