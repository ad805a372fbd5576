"""The ClickHouse reads of a span's tokens and cost (store/derive/conventions.py's
clickhouse_usage_reads_sql, for the ClickHouse mirror of docs/metrics.md §11) type otel_traces'
string attributes as ingest types them into DuckDB (store/rows/usage.py): the same spans, sent
through both, give the same columns, valid values, bad ones and two spellings alike."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from bench.support.clickhouse_load.traces import load_requests
from store import clickhouse, conventions
from tests.support.trace_builder import TraceBuilder, open_db, store

# slow, left out of make test-fast: chdb starts in a few seconds
pytestmark = pytest.mark.slow

COLUMNS = ("usage_input", "usage_cache_read", "usage_cache_write", "usage_output",
           "usage_reasoning", "usage_total", "cost_reported_nano", "usage_ignored",
           "budget_total_tokens", "budget_total_usd_nano", "budget_refused_by",
           "budget_run_exhausted_by", "usage_input_includes_cache")
VALUES = [
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


def test_clickhouse_types_usage_as_ingest_does(tmp_path: Path) -> None:
    b = TraceBuilder(seed=11)
    run = b.run(0, 1_000, None)
    for index, attributes in enumerate(VALUES):
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
        reads = conventions.clickhouse_usage_reads_sql()
        got = con._frame_text(f"SELECT toString(SpanName) AS name, {reads} FROM otel_traces "
                              "WHERE SpanName LIKE 'usage %' ORDER BY name", {})
    finally:
        duck.close()
        clickhouse.close_all()
        shutil.rmtree(folder, ignore_errors=True)
    rows = [tuple(_plain(value) for value in row)
            for row in got[["name", *COLUMNS]].itertuples(index=False)]
    assert rows == [tuple(_plain(value) for value in row) for row in want]
    assert want[0][COLUMNS.index("usage_input") + 1] == 1200  # the test reads real values
    assert want[3][COLUMNS.index("cost_reported_nano") + 1] == 250_000_000


def _plain(value: object) -> object:
    """A cell as Python compares it: NaN/None alike, arrays as lists, numbers as ints."""
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if value == []:  # ClickHouse has no NULL array: none ignored is [] there
        return None
    if isinstance(value, float):
        return None if value != value else int(value) if value.is_integer() else value
    return value
