"""The ClickHouse derivation reads usage, costs and budgets from the exporter's strings exactly as
ingest types them (store/derive/usage_reads.py against store/rows/usage.py and
store/rows/typed_attributes.py): every cast, run in ClickHouse (chdb) over a corpus of odd
values and of doubles as the Collector's exporter writes them, equals ingest's own for the
same text, value for value; and whole spans sent through both (the Collector's rows, DuckDB's
ingest) give the same columns: first valid spellings, cost candidates, bad values named."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pandas as pd
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from bench.support.clickhouse_load.traces import as_string, load_requests
from store import TYPED_ATTRIBUTES, clickhouse

# below the front (tests/project/test_layers.py): the module that renders the ClickHouse casts
from store.derive import usage_reads
from tests.support.trace_builder import TraceBuilder, open_db, store

# ingest's casts, as the attributes they read are typed (store/rows/usage.py,
# store/rows/typed_attributes.py)
token_count = TYPED_ATTRIBUTES["gen_ai.usage.input_tokens"][1]
usd_nano = TYPED_ATTRIBUTES["budget.cost_usd"][1]
as_label = TYPED_ATTRIBUTES["budget.refused_by"][1]
as_bool = TYPED_ATTRIBUTES["budget.usage.input_includes_cache"][1]

# slow, left out of make test-fast: one chdb query over ~2,900 values (chdb's start is seconds)
pytestmark = pytest.mark.slow

ODD = [
    "", " ", "0", "-0", "+0", "00", "007", "1", "1200", "1200.0", "1200.5", "1e3", "1E3",
    "1e+3", "1.5e3", "1e12", "1000000000000", "1000000000001", "-1", "-0.0", "2.5", "many",
    "NaN", "nan", "inf", "-inf", "Infinity", "+Inf", "json: unsupported value: NaN", "true",
    "false", "TRUE", " yes ", "No", "1_000", "1__000", "_1", "1_", "1_0.5_5", "1e1_0", "١٢",
    "٣.٥", "𝟙𝟚", "\u00a0 12 \u2000", "\x0b5\x1c", "1\u200b", "0x10", ".5", "5.", ".", "1e",
    "e5", "+.5e-3", "1e-400", "1e400", "1" + "0" * 400, "0." + "0" * 400 + "1",
    "100.000000000000001", "100.00000000000001", "9007199254740993", "999999999999.9999",
    "999999999999.99999999", "0.0123", "0.1", "1e-7", "1e-07", "5e-10", "1.5e-9", "2.5e-9",
    "3.5e-9", "4.5e-9", "4.50000000000000000001e-9", "0.0000000025", "1000000000",
    "1000000000.0000000001", "1000000000.000", "1E+9", "10e8", "0.1e10", "1000000001",
    "0e999999999999", "1e999999999999999999999", "1e-999999999999999999999",
    "0e-99999999999999999999999", "1e-1000030", "5e-1000035", "1e-1999999999999999997",
    "1e-1999999999999999998", "0e-1999999999999999998", "0.00e1000000000000000001",
    "0.0000000005000000000000000000000000001", "0.000000000500000000000000000000000001",
    "0.12345678901234567890123456789", "0.99999999999999999999999999995",
    "999999999.99999999999999999999", "999999999.9999999995", "999999999.9999999994999",
    "-sNaN", "NaN123", " _1_ ", "1_ _2", "1e+", "++1", "1.e5", "1.5_", "_._5_", "in_f", "-_1",
    "_-1", "1 0", "\t12\n", "1,5", "1.5.5", "١.٥e٢", "1e0000000000000000000000001",
    "123456789012", "-0e5", "+1e2", "00.00e5", "9223372036854775807", "18446744073709551616",
    "1e9223372036854775807", "5" * 60, "0." + "5" * 60, "∞", "1e١", "0.000000001", " USD",
    "usd", "Eur", "[1]", '{"a": 1}', "MTIz"]


def _corpus() -> list[str]:
    """ODD, and numbers as agents send them and the exporter writes them: ints, doubles (in
    the exporter's shortest form and in Python's), fractions of a dollar."""
    rnd = random.Random(43)
    values = list(ODD)
    for _ in range(700):
        number = rnd.choice([rnd.random(), rnd.random() * 10 ** rnd.randint(-12, 13),
                             float(rnd.randint(0, 10 ** rnd.randint(1, 13))),
                             rnd.randint(0, 10**13) / 10 ** rnd.randint(0, 12)])
        values += [as_string(number), repr(number),
                   str(rnd.randint(-5, 10 ** rnd.randint(1, 13)))]
    return values


@pytest.fixture(scope="module")
def casts(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, list]]:
    """Each value of the corpus with what ClickHouse makes of it."""
    folder = tmp_path_factory.mktemp("usage_reads") / "data"
    con = clickhouse.connect(f"chdb://{folder}")
    values = _corpus()
    try:
        frame = con.frame_text(
            "SELECT arrayMap(v -> (" + ", ".join([
                usage_reads.token_count("v"), usage_reads.usd_nano("v"),
                usage_reads.as_label("v"), usage_reads.as_bool("v")]) + "), "
            "CAST({values:Array(String)}, 'Array(Nullable(String))')) AS casts",
            {"values": _array_literal(values)})
    finally:
        clickhouse.close_all()
        shutil.rmtree(Path(folder), ignore_errors=True)
    return list(zip(values, [list(cast) for cast in frame.iat[0, 0]], strict=True))


def _array_literal(values: list[str]) -> str:
    """The values as a ClickHouse array literal (a bound parameter's text)."""
    return "[" + ",".join("'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
                          for v in values) + "]"


def _ingest(value: str) -> tuple:
    """What ingest makes of the value as a string (INVALID: present, not valid)."""
    count, cost = token_count(value), usd_nano(value)
    return (count if isinstance(count, int) else usage_reads.INVALID,
            cost if isinstance(cost, int) else usage_reads.INVALID,
            as_label(value), as_bool(value))


def test_every_cast_equals_ingests(casts: list[tuple[str, list]]) -> None:
    differ = [(value, got, _ingest(value)) for value, got in casts
              if tuple(None if x is None else int(x) if i < 2 else x
                       for i, x in enumerate(got)) != _ingest(value)]
    assert not differ, differ[:5]
    assert len(casts) > 2_000


def test_the_corpus_holds_valid_and_invalid_of_each(casts: list[tuple[str, list]]) -> None:
    """A corpus of only invalid values (or only valid) would pass the comparison above."""
    ingested = [_ingest(value) for value, _ in casts]
    for position in (0, 1):
        results = [row[position] for row in ingested]
        assert results.count(usage_reads.INVALID) > 100
        assert sum(1 for r in results if r is not None and r > 0) > 500
    assert {True, False, None} <= {row[3] for row in ingested}


# Whole spans: the columns ingest stores, from attributes of every kind (ints, doubles, strings,
# bools, NaN), two spellings of one quantity, a cost in another currency, groups of costs.
COLUMNS = ("usage_input", "usage_cache_read", "usage_cache_write", "usage_output",
           "usage_reasoning", "usage_total", "cost_reported_nano", "usage_ignored",
           "budget_total_tokens", "budget_total_usd_nano", "budget_refused_by",
           "budget_run_exhausted_by", "usage_input_includes_cache")
SPANS = [
    {"gen_ai.usage.input_tokens": -3, "gen_ai.usage.prompt_tokens": "1200",
     "ai.usage.inputTokens": 7, "gen_ai.usage.output_tokens": 80.0,
     "gen_ai.usage.reasoning.output_tokens": 2.5,
     "llm.token_count.completion_details.reasoning": " 30 ",
     "gen_ai.usage.cache_read.input_tokens": 10**12 + 1, "ai.usage.cachedInputTokens": 1e3,
     "budget.usage.input_includes_cache": "no", "gen_ai.usage.cost.amount": 0.5,
     "gen_ai.usage.cost.currency": "EUR", "llm.cost.prompt": 0.001,
     "llm.cost.completion": "0.0025", "budget.refused_by": " Tokens "},
    {"gen_ai.usage.total_tokens": True, "llm.usage.total_tokens": float("nan"),
     "ai.usage.totalTokens": "77", "budget.cost_usd": "1e-05", "operation.cost": 3,
     "budget.usage.input_includes_cache": 1, "budget.total_tokens": "2e3",
     "budget.total_usd": 0.0123, "budget.run.exhausted_by": "USD"},
    {"gen_ai.usage.cost": 0.123456789499, "llm.cost.total": "cheap",
     "gen_ai.usage.input_tokens": "  12 ", "budget.total_usd": -1,
     "gen_ai.usage.cost.amount": "7", "gen_ai.usage.cost.currency": "usd",
     "budget.usage.input_includes_cache": True},
    {"ai.usage.inputTokens": 100, "gen_ai.usage.input_tokens": 100,
     "ai.usage.outputTokens": 20, "gen_ai.usage.output_tokens": 20, "operation.cost": 1e9 + 1,
     "budget.cost_usd": float("inf"), "llm.cost.prompt": 0.25},
    {"gen_ai.operation.name": "chat"},
]


def _typed_sql() -> str:
    """The typed columns of otel_traces' spans, through the three steps of derive_build.sql
    that usage_reads renders (raw, typed, recognised)."""
    fragments = usage_reads.fragments()
    return (f"SELECT *, {fragments['usage_typed']} FROM ("
            f"SELECT *, {fragments['usage_values']} FROM ("
            f"SELECT toString(SpanName) AS name, {fragments['usage_reads']} FROM otel_traces "
            "WHERE SpanName LIKE 'usage %')) ORDER BY name")


def test_whole_spans_typed_as_ingest_types_them(tmp_path: Path) -> None:
    b = TraceBuilder(seed=11)
    run = b.run(0, 1_000, None)
    for index, attributes in enumerate(SPANS):
        b.span(f"usage {index}", index * 10, index * 10 + 5, parent=run, attributes=attributes)
    spans = b.finished()
    duck = open_db(tmp_path)
    folder = tmp_path / "chdb"
    try:
        store(duck, spans)
        want = duck.execute(f"SELECT name, {', '.join(COLUMNS)} FROM spans "
                            "WHERE name LIKE 'usage %' ORDER BY name").fetchall()
        con = clickhouse.connect(f"chdb://{folder}")
        assert load_requests(con, [encode_spans(spans)]) == len(spans)
        got = con.frame_text(_typed_sql(), {})
    finally:
        duck.close()
        clickhouse.close_all()
        shutil.rmtree(folder, ignore_errors=True)
    rows = [tuple(_plain(value) for value in row)
            for row in got[["name", *COLUMNS]].itertuples(index=False)]
    assert rows == [tuple(_plain(value) for value in row) for row in want]
    assert want[0][COLUMNS.index("usage_input") + 1] == 1200  # the test reads real values
    assert want[3][COLUMNS.index("cost_reported_nano") + 1] == 250_000_000
    assert want[0][COLUMNS.index("usage_ignored") + 1]  # and ignores some


def _plain(value: object) -> object:
    """A cell as Python compares it: NaN/None alike, arrays as lists, numbers as ints."""
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list | tuple) and len(value) == 0:
        return None  # ClickHouse has no NULL array: none ignored is [] there
    if isinstance(value, float):
        return None if value != value else int(value) if value.is_integer() else value
    return value
