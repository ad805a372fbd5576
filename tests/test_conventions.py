"""SPEC §9 (issue 13): which spans are steps, of what kind and name, recognised from which
convention, and how wrappers, lone agents, tools inside model calls and runs that are one call
become levels. Traces are hand-built with the real OpenTelemetry SDK (tests/trace_builder.py):
they test SPEC's rules themselves, not any one library's output.

recognised_traces() is shared with tests/test_conventions_parity.py, which derives the same
spans on ClickHouse and compares every step and run.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from opentelemetry.trace import SpanKind

from queries.filters import Filters
from queries.reports import failures
from store import BACKEND_QUERIES as CLICKHOUSE_QUERIES  # the derivations: the store's
from store import DERIVE_QUERIES as QUERIES
from store import conventions
from tests.trace_builder import TraceBuilder, open_db, run_row, step_rows, store

CLIENT = SpanKind.CLIENT
OP = "gen_ai.operation.name"
OI = "openinference.span.kind"


def recognised_traces() -> tuple[TraceBuilder, dict[str, Any]]:
    """One run per concern; returns the builder and the run spans by concern."""
    b = TraceBuilder(seed=1313, service="conv-svc")
    runs: dict[str, Any] = {}

    # Every row of SPEC §9's table, side by side under one root (so no agent is alone).
    root = runs["rows"] = b.run(0, 60_000, 60_000)
    rows = [
        ("r1", {"budget.step.kind": "backoff", "budget.step.name": "sleep"}, {}),
        ("r2", {OP: "chat", "gen_ai.response.model": "gpt-resp"}, {}),
        ("r2 embeddings", {OP: "embeddings", "gen_ai.request.model": "emb-1"}, {}),
        ("r3", {OP: "retrieval", "gen_ai.data_source.id": "kb"}, {}),
        ("r4", {OI: "LLM", "llm.invocation_parameters": '{"model": "gpt-inv", "t": 0}'}, {}),
        ("r4 reranker", {OI: "RERANKER", "reranker.model_name": "rr"}, {}),
        ("r5", {OI: "RETRIEVER", "tool.name": "search_docs"}, {}),
        ("r6 tool", {"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather"}, {}),
        ("r6 model", {"llm.request.type": "chat", "gen_ai.request.model": "gpt-ll"}, {}),
        ("r7", {"ai.operationId": "ai.toolCall", "ai.toolCall.name": "lookup"}, {}),
        ("r8", {"ai.operationId": "ai.streamText.doStream", "ai.model.id": "gpt-v"}, {}),
        ("r9", {"gen_ai.system": "openai", "gen_ai.request.model": "gpt-c"},
         {"kind": CLIENT}),
        ("r10", {OP: "invoke_agent", "gen_ai.agent.name": "maker"}, {}),
        ("r10 oi", {OI: "AGENT", "agent.name": "crew-a"}, {}),
        ("r10 traceloop", {"traceloop.span.kind": "agent", "traceloop.entity.name": "tl"}, {}),
        ("r11", {OP: "some_new_op"}, {"kind": CLIENT}),
        ("r12 grpc", {"rpc.system": "grpc", "rpc.service": "pay.Ledger", "rpc.method": "Post"},
         {"kind": CLIENT}),
        ("r12 http", {"http.request.method": "GET", "server.address": "api.example.com",
                      "url.template": "/v1/items/{id}"}, {"kind": CLIENT}),
        ("r12 old http", {"http.method": "GET", "http.url": "https://Old.Example.com:8443/x?q=1"},
         {"kind": CLIENT}),
        ("r12 bare", {"http.request.method": "POST"}, {"kind": CLIENT}),
        # not steps
        ("wrapper", {OP: "invoke_workflow"}, {}),
        ("chain", {OI: "CHAIN"}, {}),
        ("internal http", {"http.request.method": "GET"}, {}),
        ("internal model", {"gen_ai.request.model": "x"}, {}),
        # SPEC §9 row 11: only a leaf call that leaves the process; building an agent never
        ("internal op", {OP: "execute_event_loop_cycle"}, {}),
        ("create agent", {OP: "create_agent", "gen_ai.agent.name": "maker"}, {"kind": CLIENT}),
        # row 10 only with a name attribute; row 9 only for model operations
        ("unnamed agent", {OI: "AGENT"}, {}),
        ("agent with system", {OP: "invoke_agent", "gen_ai.system": "openai"}, {"kind": CLIENT}),
        # SPEC: conflicting conventions follow the table's order
        ("conflict", {OP: "chat", "gen_ai.request.model": "gpt-first", OI: "TOOL",
                      "tool.name": "never"}, {}),
        ("conflict 2", {OI: "TOOL", "tool.name": "oi-tool", "traceloop.span.kind": "agent"},
         {}),
    ]
    for index, (name, attributes, extra) in enumerate(rows):
        b.span(name, index * 100, index * 100 + 50, parent=root, attributes=attributes,
               **extra)

    # Wrappers are transparent; a lone agent with steps below is transparent too, twice over.
    lone = runs["lone"] = b.run(0, 10_000, 10_000)
    workflow = b.span("workflow", 0, 10_000, parent=lone, attributes={OP: "invoke_workflow"})
    outer = b.span("outer agent", 0, 10_000, parent=workflow, attributes={
        OP: "invoke_agent", "gen_ai.agent.name": "outer"})
    inner = b.span("inner agent", 0, 9_000, parent=outer, attributes={
        OI: "AGENT", "agent.name": "inner"})
    chain = b.span("chain", 0, 9_000, parent=inner, attributes={OI: "CHAIN"})
    b.span("llm", 0, 4_000, parent=chain, attributes={OI: "LLM", "llm.model_name": "m"})
    tool = b.span("tool", 4_000, 9_000, parent=chain, attributes={OI: "TOOL",
                                                                  "tool.name": "fetch"})
    b.span("tool http", 4_000, 9_000, parent=tool, kind=CLIENT,
           attributes={"http.request.method": "GET", "server.address": "svc"})

    # Two agents side by side stay subagent steps; a lone agent with nothing inside is one.
    crew = runs["crew"] = b.run(0, 10_000, 10_000)
    for who, start in (("alice", 0), ("bob", 5_000)):
        agent = b.span(f"agent {who}", start, start + 5_000, parent=crew,
                       attributes={OP: "invoke_agent", "gen_ai.agent.name": who})
        b.span(f"chat {who}", start, start + 4_000, parent=agent,
               attributes={OP: "chat", "gen_ai.request.model": "m"})
    empty = runs["empty agent"] = b.run(0, 10_000, 10_000)
    b.span("failed agent", 0, 100, parent=empty, error=True,
           attributes={OP: "invoke_agent", "gen_ai.agent.name": "early"})

    # An agent alone under a tool step: transparent there too; its model call is the tool's.
    under = runs["agent under step"] = b.run(0, 10_000, 10_000)
    handoff = b.span("handoff tool", 0, 8_000, parent=under,
                     attributes={OP: "execute_tool", "gen_ai.tool.name": "handoff"})
    helper = b.span("helper agent", 0, 8_000, parent=handoff,
                    attributes={OP: "invoke_agent", "gen_ai.agent.name": "helper"})
    b.span("helper chat", 0, 7_000, parent=helper,
           attributes={OP: "chat", "gen_ai.request.model": "m"})
    b.span("side chat", 8_000, 9_000, parent=under,
           attributes={OP: "chat", "gen_ai.request.model": "m"})

    # A tool inside a model call stands beside it; the model is not active while it runs.
    stream = runs["tool in model"] = b.run(0, 10_000, 10_000)
    model = b.span("doStream", 0, 6_000, parent=stream, attributes={
        "ai.operationId": "ai.streamText.doStream", "ai.model.id": "gpt-v"})
    b.span("toolCall a", 1_000, 3_000, parent=model, attributes={
        "ai.operationId": "ai.toolCall", "ai.toolCall.name": "a"})
    b.span("toolCall b", 2_000, 4_000, parent=model, attributes={
        "ai.operationId": "ai.toolCall", "ai.toolCall.name": "b"})

    # Pure auto-instrumentation: the trace is one model call, and it failed.
    runs["one call"] = b.span("chat gpt-4o", 0, 2_000, kind=CLIENT, error=True,
                              status_message="Error code: 503 - overloaded", attributes={
                                  OP: "chat", "gen_ai.request.model": "gpt-4o",
                                  "gen_ai.system": "openai",
                                  "error.type": "<class 'openai.InternalServerError'>"})
    runs["one http call"] = b.span("GET", 0, 1_000, kind=CLIENT, attributes={
        "http.request.method": "GET", "server.address": "api.example.com",
        "http.response.status_code": 429})

    # An HTTP client span inside a step is no step; inside an agent it is one.
    nested = runs["http nesting"] = b.run(0, 10_000, 10_000)
    fetch = b.span("fetch tool", 0, 3_000, parent=nested,
                   attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch"})
    b.span("fetch http", 0, 3_000, parent=fetch, kind=CLIENT,
           attributes={"http.request.method": "GET", "server.address": "a"})
    agent = b.span("planner", 3_000, 9_000, parent=nested,
                   attributes={OP: "invoke_agent", "gen_ai.agent.name": "planner"})
    b.span("planner http", 3_000, 5_000, parent=agent, kind=CLIENT,
           attributes={"http.request.method": "POST", "server.address": "b",
                       "http.route": "/plan"})
    return b, runs


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
    # two agents side by side: the run belongs to the service (SPEC §9, the run's agent)
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
    for queries, name in ((QUERIES, "derive_refresh"), (CLICKHOUSE_QUERIES, "derive_build")):
        text = queries[name].text
        assert "/*@" not in text
        assert conventions.step_row_sql() in text and conventions.convention_sql() in text
    with pytest.raises(KeyError):
        conventions.render("/*@no_such_rule*/", "duckdb")


def test_a_constant_outside_the_allow_list_is_refused() -> None:
    with pytest.raises(ValueError):
        conventions._literal("x' OR 1=1")
    assert re.fullmatch(conventions._SAFE_CONSTANT.pattern, "ai.toolCall")


def test_the_run_view_and_the_run_command_say_what_recognised_each_step(tmp_path) -> None:
    from click.testing import CliRunner

    from budgetscope.cli import cli
    from dashboard.summaries import run_steps_table
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
