"""docs/conventions.md: which spans are steps, of what kind and name, recognised from which
convention, and how wrappers, lone agents, tools inside model calls and runs that are one call
become levels. Traces are hand-built with the real OpenTelemetry SDK
(tests/support/trace_builder.py): they test the rules themselves, not any one library's
output.

recognised_traces() (tests/support/convention_traces.py) is shared with
tests/clickhouse/test_conventions_parity.py, which derives the same spans on ClickHouse and compares
every step and run.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from queries.filters import Filters
from queries.reports import failures
from store import clickhouse
from store.testing import DERIVE_QUERIES as QUERIES
from store.testing import conventions
from tests.support.convention_traces import CLIENT, OP, recognised_traces
from tests.support.trace_builder import TraceBuilder, open_db, run_row, step_rows, store


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory):
    b, runs = recognised_traces()
    con = open_db(tmp_path_factory.mktemp("conventions"))
    store(con, b.finished())
    yield con, b, runs
    con.close()


def steps_of(derived, concern: str) -> dict[str, dict[str, Any]]:
    con, b, runs = derived
    return step_rows(con, b.trace_id(runs[concern]))


def test_every_row_of_the_table(derived) -> None:
    steps = steps_of(derived, "rows")
    got = {name: (row["step_key"], row["convention"]) for name, row in steps.items()}
    assert got == {
        "r1": ("backoff:sleep", "budget"),
        "r2": ("model:gpt-resp", "otel_genai"),
        "r2 embeddings": ("model:emb-1", "otel_genai"),
        "r3": ("tool:kb", "otel_genai"),
        "r4": ("model:gpt-inv", "openinference"),
        "r4 reranker": ("model:rr", "openinference"),
        "r5": ("tool:search_docs", "openinference"),
        "r6 tool": ("tool:get_weather", "openllmetry"),
        "r6 model": ("model:gpt-ll", "openllmetry"),
        "r7": ("tool:lookup", "vercel_ai"),
        "r8": ("model:gpt-v", "vercel_ai"),
        "r9": ("model:gpt-c", "otel_genai"),
        "r10": ("subagent:maker", "otel_genai"),
        "r10 oi": ("subagent:crew-a", "openinference"),
        "r10 traceloop": ("subagent:tl", "openllmetry"),
        "r11": ("other:r11", "otel_genai"),
        "r12 grpc": ("other:pay.Ledger/Post", "rpc"),
        "r12 http": ("other:api.example.com /v1/items/{id}", "http"),
        "r12 old http": ("other:old.example.com", "http"),
        "r12 bare": ("other:r12 bare", "http"),
        "conflict": ("model:gpt-first", "otel_genai"),
        "conflict 2": ("tool:oi-tool", "openinference"),
    }
    assert all(row["is_top_level"] for row in steps.values())


def test_wrappers_and_lone_agents_are_transparent(derived) -> None:
    steps = steps_of(derived, "lone")
    assert set(steps) == {"llm", "tool"}  # two nested lone agents, a workflow and a chain
    assert steps["llm"]["is_top_level"] and steps["tool"]["is_top_level"]
    # the HTTP span below the tool is no step of its own (a step lies above it)
    con, b, runs = derived
    assert run_row(con, b.trace_id(runs["lone"]))["agent"] == "outer"


def test_two_agents_are_two_steps_and_a_lone_empty_agent_is_one(derived) -> None:
    crew = steps_of(derived, "crew")
    assert {n: (r["step_key"], r["step_level"]) for n, r in crew.items()} == {
        "agent alice": ("subagent:alice", 0), "chat alice": ("model:m", 1),
        "agent bob": ("subagent:bob", 0), "chat bob": ("model:m", 1)}
    con, b, runs = derived
    # two agents side by side: the run belongs to the service (docs/conventions.md, the run's agent)
    assert run_row(con, b.trace_id(runs["crew"]))["agent"] == "conv-svc"
    empty = steps_of(derived, "empty agent")
    assert {n: (r["step_key"], r["class"]) for n, r in empty.items()} == {
        "failed agent": ("subagent:early", "error")}


def test_agent_alone_under_a_step(derived) -> None:
    steps = steps_of(derived, "agent under step")
    assert {n: (r["step_level"], r["top_step_id"] == steps["handoff tool"]["span_id"])
            for n, r in steps.items()} == {
        "handoff tool": (0, True), "helper chat": (1, True), "side chat": (0, False)}


def test_tool_inside_a_model_call_stands_beside_it(derived) -> None:
    con, b, runs = derived
    steps = steps_of(derived, "tool in model")
    assert all(row["is_top_level"] for row in steps.values()), steps
    consumption = {n: r["consumption_ms"] for n, r in steps.items()}
    # model 0-6000 less the tools' union 1000-4000; a 1000-3000 and b 2000-4000 share 2000-3000
    assert consumption == {"doStream": 3_000.0, "toolCall a": 1_500.0, "toolCall b": 1_500.0}
    run = run_row(con, b.trace_id(runs["tool in model"]))
    assert run["unattributed_ms"] == 4_000.0
    assert sum(consumption.values()) + run["unattributed_ms"] == 10_000


def test_a_trace_that_is_one_call_is_its_own_step(derived) -> None:
    con, b, runs = derived
    steps = steps_of(derived, "one call")
    assert {n: (r["step_key"], r["class"], r["is_top_level"]) for n, r in steps.items()} == {
        "chat gpt-4o": ("model:gpt-4o", "upstream_error", True)}
    http = steps_of(derived, "one http call")
    assert {n: (r["step_key"], r["class"]) for n, r in http.items()} == {
        "GET": ("other:api.example.com", "upstream_error")}
    counted = failures(con, Filters()).set_index("step_key")
    assert counted.loc["model:gpt-4o", "upstream_errors"] == 1


def test_http_client_spans_are_steps_only_with_no_step_above(derived) -> None:
    con, b, runs = derived
    steps = steps_of(derived, "http nesting")
    assert {n: (r["step_key"], r["step_level"]) for n, r in steps.items()} == {
        "fetch tool": ("tool:fetch", 0),
        "planner": ("subagent:planner", 0),
        "planner http": ("other:b /plan", 1)}


# ---- the table itself ------------------------------------------------------------------

def test_every_attribute_the_rules_read_is_typed_at_ingest() -> None:
    for attribute in conventions.convention_attributes():
        assert conventions.column(attribute)


def test_both_derivations_are_rendered_from_the_table() -> None:
    for queries, name in ((QUERIES, "derive_refresh"),
                          (clickhouse.backend_queries(), "derive_build")):
        text = queries[name].text
        assert "/*@" not in text
        assert conventions.step_row_sql() in text and conventions.convention_sql() in text
    with pytest.raises(KeyError):
        conventions.render("/*@no_such_rule*/", "duckdb")


def test_a_constant_outside_the_allow_list_is_refused() -> None:
    with pytest.raises(ValueError):
        conventions.sql_constant("x' OR 1=1")
    assert re.fullmatch(conventions.SAFE_CONSTANT.pattern, "ai.toolCall")


def test_the_run_view_and_the_run_command_say_what_recognised_each_step(tmp_path) -> None:
    from click.testing import CliRunner

    from budgetscope.cli import cli
    from dashboard.run_summaries import run_steps_table
    from queries.run_view import load_run

    b = TraceBuilder(seed=7)
    run = b.run(0, 3_000, 3_000)
    b.span("chat", 0, 1_000, parent=run, attributes={OP: "chat", "gen_ai.request.model": "m"})
    b.span("GET", 1_000, 2_000, parent=run, kind=CLIENT,
           attributes={"http.request.method": "GET", "server.address": "svc"})
    con = open_db(tmp_path)
    store(con, b.finished())
    view = load_run(con, b.trace_id(run))
    con.close()
    table = run_steps_table(view.steps, view.summary)
    assert list(zip(table["step"], table["from"], strict=True)) == [
        ("model:m", "otel_genai"), ("other:svc", "http")]
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "test.duckdb"), "run",
                                      b.trace_id(run)])
    assert result.exit_code == 0, result.output
    # a waterfall row: mark, number, step, bar, start, duration, class, convention
    rows = [re.split(r"\s+", line.split("#", 1)[1]) for line in result.output.splitlines()
            if re.match(r"^[A-Z]{0,2}\s+#\d", line)]
    lines = {row[1]: row for row in rows}
    assert lines["model:m"][-2:] == ["ok", "otel_genai"]
    assert lines["other:svc"][-2:] == ["ok", "http"]
