"""Dollars from integer nano-dollars (queries/money.py) as every report writes them
(queries/render.py): exact, up to 9 decimals, trailing zeros trimmed, a number in JSON."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queries.money import dollar_text, dollars, with_dollars
from queries.readable import table_formats, usd, usd_headline, usd_nano
from queries.render import to_csv_bytes, to_json_text, to_text_table


@pytest.mark.parametrize("nano,text", [
    (0, "0"), (1, "0.000000001"), (12_300_000, "0.0123"), (2_000_000_000, "2"),
    (10_000_000_000, "10"), (300_000_000, "0.3"), (510_000_000, "0.51"),
    (9_223_372_036_854_775_807, "9223372036.854775807"), (-10_000_000, "-0.01"),
    # a HUGEINT sum has more digits than the decimal context's 28: none is lost
    (10**38 + 1, "100000000000000000000000000000.000000001"),
])
def test_dollar_text(nano: int, text: str) -> None:
    assert dollar_text(dollars(nano)) == text
    if abs(nano) < 2**63:
        assert dollar_text(dollars(np.int64(nano))) == text
    assert dollar_text(dollars(str(nano))) == text


@pytest.mark.parametrize("amount,text", [
    (Decimal("1E+1"), "10"), (Decimal("0.50"), "0.5"), (Decimal("2.000"), "2"),
    (Decimal("-0E-9"), "0"), (Decimal("1E-9"), "0.000000001"), (Decimal("120"), "120")])
def test_dollar_text_of_any_decimal(amount: Decimal, text: str) -> None:
    assert dollar_text(amount) == text


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.decimals(allow_nan=True, allow_infinity=True).filter(lambda d: not d.is_snan()),
                 st.integers(-(10**40), 10**40).map(lambda n: dollars(n)),
                 st.builds(lambda n, e: Decimal(n).scaleb(e), st.integers(-(10**20), 10**20),
                           st.integers(-30, 12))))
def test_dollar_text_is_the_fixed_point_text_trimmed(amount: Decimal) -> None:
    """dollar_text reads str() where it has no exponent: the digits of format(amount, "f")."""
    text = format(amount, "f")
    expected = "0" if not amount.is_nan() and amount == 0 else (
        text.rstrip("0").rstrip(".") if "." in text else text)
    assert dollar_text(amount) == expected


def test_a_float_is_refused_and_missing_is_none() -> None:
    with pytest.raises(TypeError, match="not the float"):
        dollars(0.3)
    with pytest.raises(TypeError):
        dollars(True)
    assert dollars(None) is None and dollars(pd.NA) is None and dollars(float("nan")) is None


def test_sums_never_pass_through_a_float() -> None:
    """$0.1 + $0.2 is 0.3 in every form, where a float sum prints 0.30000000000000004."""
    assert 0.1 + 0.2 != 0.3
    frame = with_dollars(pd.DataFrame({"run": ["a", "b"], "cost_usd": pd.array(
        [100_000_000 + 200_000_000, None], dtype="Int64")}), ["cost_usd"])
    assert to_csv_bytes(frame) == b"run,cost_usd\na,0.3\nb,\n"
    assert json.loads(to_json_text(frame), parse_float=Decimal) == [
        {"run": "a", "cost_usd": Decimal("0.3")}, {"run": "b", "cost_usd": None}]
    assert '"cost_usd": 0.3\n' in to_json_text(frame)
    # nano-dollars past 2^53 of them ($9M) keep every digit
    big = with_dollars(pd.DataFrame({"cost_usd": [2**53 + 1]}), ["cost_usd"])
    assert to_csv_bytes(big) == b"cost_usd\n9007199.254740993\n"
    assert "9007199.254740993" in to_json_text(big)


def test_the_json_writer_is_json_dumps_for_everything_else() -> None:
    """to_json_text writes its list of objects itself (json.dumps knows no Decimal): for
    every other value, byte for byte what json.dumps(indent=2) wrote."""
    frame = pd.DataFrame({
        "name": ["a\u0085b", "=cmd", "quote\"\n", "ünï"], "count": [1, 0, -3, 10**15],
        "share": [0.5, float("nan"), 1e-7, 2.25], "flag": [True, False, None, True],
        "elapsed_ms": [1.23456, 0.0, -0.0, 3.0]})
    from queries.render import cell
    expected = [{c: cell(v, c) for c, v in zip(frame.columns, row, strict=True)}
                for row in frame.itertuples(index=False, name=None)]
    from queries.terminal import json_inert
    assert to_json_text(frame) == json_inert(json.dumps(expected, indent=2,
                                                        ensure_ascii=False)) + "\n"
    assert to_json_text(frame.iloc[:0]) == "[]\n"


def test_dollar_columns_in_a_table_for_people() -> None:
    frame = with_dollars(pd.DataFrame({
        "step": ["a", "b"], "cost_usd": [510_000_000, 2],
        "usd_budget": pd.array([500_000_000, None], dtype="Int64")}), ["cost_usd", "usd_budget"])
    formats = table_formats(frame.columns)
    assert set(formats) == {"cost_usd", "usd_budget"}
    table = to_text_table(frame, formats).splitlines()
    # right-aligned as numbers are, with their sign; an undefined amount is the no-value mark
    assert table[0] == "step      cost_usd  usd_budget"
    assert table[2] == "a            $0.51       $0.50"
    assert table[3] == "b     $0.000000002           –"
    # for people: cents at least, then every digit the amount has
    assert usd(Decimal("0.51"), at_least=True) == "≥ $0.51"
    assert [usd_nano(n) for n in (0, 2_000_000_000, 300_000_000, 12_300_000, 1)] == [
        "$0.00", "$2.00", "$0.30", "$0.0123", "$0.000000001"]
    assert usd_nano(None) == "–"


def test_a_headline_total_is_rounded_for_reading_and_a_lower_bound_rounded_down() -> None:
    """Tiles show a period's total: cents from $1 on (thousands separated), three significant
    digits below; `≥ $x` never claims more than was counted."""
    cases = {("28.0982638", False): "$28.10", ("28.0982638", True): "≥ $28.09",
             ("3.9010114", False): "$3.90", ("1234.565", False): "$1,234.56",
             ("1234.575", False): "$1,234.58", ("0.0982638", False): "$0.0983",
             ("0.0982638", True): "≥ $0.0982", ("0.5", False): "$0.50",
             ("0.000412345", False): "$0.000412", ("0.000000001", False): "$0.000000001",
             ("0.9996", False): "$1.00", ("0", False): "$0.00", ("0.9999", True): "≥ $0.999"}
    for (amount, at_least), shown in cases.items():
        assert usd_headline(Decimal(amount), at_least=at_least) == shown, amount
    assert usd_headline(28_098_263_800) == "$28.10"  # nano-dollars, as the store keeps them
    assert usd_headline(None) == "–"


def test_a_column_of_sums_as_text_a_float_column_and_an_integer_column() -> None:
    """Report queries hand HUGEINT sums over as text (exact past BIGINT); a float column is
    refused unless it holds nothing (pandas makes an all-NULL column float)."""
    frame = with_dollars(pd.DataFrame({"sum": ["300000000", None, str(10**30)],
                                       "none": [float("nan")] * 3,
                                       "budget": pd.array([5 * 10**8] * 3, dtype="Int64")}),
                         ["sum", "none", "budget"])
    assert list(frame["sum"]) == [Decimal("0.3"), None, Decimal(10**21)]
    assert list(frame["none"]) == [None, None, None]
    assert list(frame["budget"]) == [Decimal("0.5")] * 3
    with pytest.raises(ValueError):
        with_dollars(pd.DataFrame({"sum": ["1.5"]}), ["sum"])
    with pytest.raises(TypeError):
        with_dollars(pd.DataFrame({"cost": [0.3]}), ["cost"])
    with pytest.raises(TypeError):
        with_dollars(pd.DataFrame({"cost": pd.array([1.5], dtype=object)}), ["cost"])


@pytest.mark.parametrize("dtype", ["int64", "Int64"])
def test_an_integer_column_by_arrow_is_exact(dtype: str) -> None:
    """The Arrow path (queries.money._integer_dollars) gives what `dollars` gives, value for
    value: negative amounts, BIGINT's ends, NULLs."""
    nanos = [0, 1, -1, 510_000_000, -10_000_000, 2**63 - 1, -(2**63), 2**53 + 1]
    values = pd.Series(nanos, dtype=dtype)
    if dtype == "Int64":
        values = pd.concat([values, pd.Series([None], dtype=dtype)], ignore_index=True)
    got = list(with_dollars(pd.DataFrame({"cost": values}), ["cost"])["cost"])
    assert got == [dollars(n) for n in nanos] + ([None] if dtype == "Int64" else [])
    assert [dollar_text(d) for d in got[:5]] == ["0", "0.000000001", "-0.000000001", "0.51",
                                                 "-0.01"]
