"""Filter values holding what a span's names may hold (tab, line feed, carriage return, NUL,
quotes, backslashes) reach the query as data on both backends: the DuckDB file binds them as
DuckDB parameters, the ClickHouse backend (chdb, in-process) sends them in ClickHouse's escaped
parameter format, where a tab or a line feed used to end the value (BAD_QUERY_PARAMETER, a
traceback). And a backend query that fails ends in one line naming the backend.

The agents are real OpenTelemetry SDK spans, stored in a DuckDB file through the receivers'
decoders and written into the Collector exporter's otel_traces table for chdb."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from bench.support.clickhouse_load.traces import load_requests
from budgetscope.cli import cli
from store import clickhouse
from tests.support.trace_builder import TraceBuilder, open_db, store

pytestmark = pytest.mark.slow  # chdb beside DuckDB

AGENTS = {
    "tab": "billing\tagent",
    "line feed": "billing\nagent",
    "carriage return": "billing\ragent",
    "crlf": "a\r\nb",
    "nul": "billing\0agent",
    "single quote": "o'brien",
    "double quote": 'say "hi"',
    "backslash": "back\\slash",
    "backslash t": "not\\ta tab",
    "backslash N": "\\N",
    "trailing backslash": "ends\\",
    "all of them": "\t\n\r\0'\"\\`{x:String}",
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(DuckDB file, chdb URL), each holding one run per hostile agent name."""
    b = TraceBuilder(seed=45)
    for index, agent in enumerate(AGENTS.values()):
        b.run(index * 1_000, index * 1_000 + 500, 2_000, gen__ai_agent_name=agent)
    spans = b.finished()
    folder = tmp_path_factory.mktemp("hostile-filters")
    duck = open_db(folder, "agents.duckdb")
    store(duck, spans)
    duck.close()
    url = f"chdb://{folder / 'chdb'}"
    assert load_requests(clickhouse.connect(url), [encode_spans(spans)]) == len(spans)
    yield str(folder / "agents.duckdb"), url
    clickhouse.close_all()
    shutil.rmtree(folder / "chdb", ignore_errors=True)


def _report(where: list[str], *arguments: str) -> tuple[int, bytes, str]:
    result = CliRunner().invoke(cli, [*where, "report", *arguments])
    return result.exit_code, result.stdout_bytes, result.output


@pytest.mark.parametrize("case", sorted(AGENTS))
def test_a_hostile_agent_name_filters_alike_on_both_backends(stored, case: str) -> None:
    db, backend = stored
    agent = AGENTS[case]
    answers = {}
    for label, where in (("duckdb", ["--db", db]), ("chdb", ["--backend", backend])):
        code, out, shown = _report(where, "runs", "--agent", agent, "--format", "json")
        assert code == 0, (label, shown)
        (run,) = json.loads(out)
        assert run["agent"] == agent, label
        answers[label] = out
        code, weekly, shown = _report(where, "weekly", "--agent", agent)
        assert code == 0, (label, shown)
        answers[label + " weekly"] = weekly
    assert answers["duckdb"] == answers["chdb"]
    assert answers["duckdb weekly"] == answers["chdb weekly"]


def test_the_escaped_format_round_trips_every_character(stored) -> None:
    """Straight through the engine: what is sent comes back as it was, for every character
    a filter value may hold (the C0 controls, DEL, quotes, backslashes, non-ASCII)."""
    _, backend = stored
    con = clickhouse.connect(backend)
    values = ["".join(chr(code) for code in range(0, 128)), "é☃\u202e𝄞", "\\", "\\\\N"]
    for value in values:
        back = con.frame_text("SELECT {v:Nullable(String)} AS v", {"v": value}).iat[0, 0]
        assert back == value
    assert con.frame_text("SELECT {v:Nullable(String)} IS NULL AS n", {"v": None}).iat[0, 0]
    assert clickhouse.parameter_text("a\tb\nc") == "a\\tb\\nc"


def test_a_failing_backend_query_is_one_line_naming_the_backend(stored) -> None:
    _, backend = stored
    con = clickhouse.connect(backend)
    clickhouse.ensure_derived(con)
    con.command("DROP TABLE budgetscope_runs")  # what the runs report reads
    try:
        code, _, shown = _report(["--backend", backend], "runs")
    finally:
        clickhouse.ensure_derived(con, force=True)
    assert code == 1, shown
    assert "Traceback" not in shown
    (line,) = shown.strip().splitlines()
    assert line.startswith("Error: the chdb backend chdb://") and "runs_report" in line, line
