"""The committed real-library fixtures (tests/real_fixtures: OTLP written by the real
instrumentation packages against fake servers on 127.0.0.1) through the recognition of
docs/conventions.md: runs, steps, classes, culprit and holder as the harness logged them, and the
same steps on the ClickHouse derivation as on DuckDB's.

A fixture that differed from the harness's truth where the rules, applied as written, give
another answer would be a strict xfail in KNOWN naming the spans, so that a change of the rules
that fixes it shows up here."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from bench.support.clickhouse_load.traces import load_files
from store import clickhouse
from tests.support.real_fixture_compare import (
    FIXTURES,
    differences,
    expected_runs,
    found_runs,
    ingested,
    load_truth,
)

NAMES = sorted(path.name.split(".")[0] for path in (FIXTURES / "otlp").glob("*.otlp.pb"))
# Fixtures where the rules of docs/conventions.md, applied as written, give another answer than the
# harness logged: strict xfails naming the spans. Empty: none.
KNOWN: dict[str, str] = {}
STEP_COLUMNS = ["run_id", "span_id", "top_step_id", "is_top_level", "step_level", "kind",
                "name", "step_key", "convention", "class", "consumption_ms", "agent"]


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fixture `budgetscope ingest`ed alone into a file of its own."""
    return {name: ingested(name, tmp_path_factory) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_fixture_matches_the_harness(databases: dict[str, Path], name: str,
                                     request: pytest.FixtureRequest) -> None:
    if name in KNOWN:
        request.applymarker(pytest.mark.xfail(reason=KNOWN[name], strict=True))
    truth = load_truth(FIXTURES / "truth" / f"{name}.json")
    assert differences(found_runs(databases[name]), expected_runs(truth)) == []


def test_every_fixture_is_recognised_by_its_convention(databases: dict[str, Path]) -> None:
    conventions = {}
    for name, path in databases.items():
        with duckdb.connect(str(path), read_only=True) as con:
            conventions[name] = {row[0] for row in con.execute(
                "SELECT DISTINCT convention FROM steps").fetchall()}
    assert conventions["grpc"] == {"rpc"}
    assert "http" in conventions["httpx"] and "http" in conventions["requests_stable"]
    assert "openinference" in conventions["openai_agents"]
    assert "openllmetry" in conventions["openllmetry"]
    assert "vercel_ai" in conventions["vercel_ai"]
    assert "otel_genai" in conventions["openai_v2"] and "otel_genai" in conventions["pydantic_ai"]
    # frameworks and SDKs that trace themselves with the GenAI conventions
    for name in ("strands", "adk", "anthropic", "anthropic_openllmetry"):
        assert conventions[name] == {"otel_genai"}, name
    assert conventions["smolagents"] == {"openinference"}
    # one call, two spans: the SDK's own span inside OpenInference's LLM span is the step
    assert conventions["anthropic_openinference"] == {"otel_genai"}


@pytest.mark.slow
def test_clickhouse_finds_the_same_steps(databases: dict[str, Path],
                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("real_chdb") / "data"
    con = clickhouse.connect(f"chdb://{folder}")
    try:
        load_files(con, [FIXTURES / "otlp" / f"{name}.otlp.pb" for name in NAMES])
        clickhouse.ensure_derived(con)
        columns = ", ".join(STEP_COLUMNS)
        got = con.frame_text(f"SELECT {columns} FROM budgetscope_steps", {})
        want = pd.concat([duckdb.connect(str(path), read_only=True).execute(
            f"SELECT {columns} FROM steps").df() for path in databases.values()])
        key = ["run_id", "span_id"]
        tidy = [frame.sort_values(key).reset_index(drop=True).astype(object)
                for frame in (got, want)]
        assert [f.where(f.notna(), None).to_dict("records") for f in tidy][0] == \
            [f.where(f.notna(), None).to_dict("records") for f in tidy][1]
    finally:
        clickhouse.close_all()
        shutil.rmtree(folder, ignore_errors=True)
