"""Dollars from integer nano-dollars (queries/money.py) as every report writes them
(queries/render.py): exact, up to 9 decimals, trailing zeros trimmed, a number in JSON."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from queries.money import dollar_text, dollars, with_dollars
from queries.readable import table_formats, usd, usd_nano
from queries.render import to_csv_bytes, to_json_text, to_text_table


@pytest.mark.parametrize("nano,text", [
    (0, "0"), (1, "0.000000001"), (12_300_000, "0.0123"), (2_000_000_000, "2"),
    (10_000_000_000, "10"), (300_000_000, "0.3"), (510_000_000, "0.51"),
    (9_223_372_036_854_775_807, "9223372036.854775807"), (-10_000_000, "-0.01"),
])
def test_dollar_text(nano: int, text: str) -> None:
    assert dollar_text(dollars(nano)) == text
    assert dollar_text(dollars(np.int64(nano))) == text
    assert dollar_text(dollars(str(nano))) == text


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
