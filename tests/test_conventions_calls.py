"""SPEC §9's rules for the shapes frameworks give one call, and runs whose spans are missing:
event-loop cycles and other in-process operations, one call recorded as two spans (nested, or
siblings from two instrumentation scopes), framework bookkeeping, HTTP client spans hung beside
their tool, spans whose parent never arrived, traces whose root never arrives, the run's agent,
and the cases that must not merge. Hand-built with the real OpenTelemetry SDK
(tests/trace_builder.py); tests/test_conventions_parity.py derives the same traces on
ClickHouse and compares every step and run.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import SpanKind

from tests.trace_builder import TraceBuilder, open_db, run_row, step_rows, store

CLIENT = SpanKind.CLIENT
OP = "gen_ai.operation.name"
OI = "openinference.span.kind"
CHAT = {OP: "chat", "gen_ai.request.model": "gpt-x"}
HTTP = {"http.request.method": "GET", "server.address": "tools.example"}


def call_traces() -> tuple[TraceBuilder, dict[str, Any]]:
    """One run per concern; returns the builder and the run spans by concern. Every trace here
    has its root, except those under "rootless", whose roots are left out of finished()."""
    b = TraceBuilder(seed=3333, service="calls-svc")
    runs: dict[str, Any] = {}

    # Strands: each event-loop cycle is an in-process operation around the calls it makes.
    run = runs["cycles"] = b.run(0, 10_000, 10_000)
    agent = b.span("invoke_agent helper", 0, 10_000, parent=run,
                   attributes={OP: "invoke_agent", "gen_ai.agent.name": "helper"})
    for number, start in enumerate((0, 5_000)):
        cycle = b.span(f"cycle {number}", start, start + 5_000, parent=agent,
                       attributes={OP: "execute_event_loop_cycle"})
        b.span(f"chat {number}", start, start + 2_000, parent=cycle, attributes=CHAT)
        tool = b.span(f"tool {number}", start + 2_000, start + 5_000, parent=cycle,
                      attributes={OP: "execute_tool", "gen_ai.tool.name": "search"})
        b.span(f"tool {number} http", start + 2_000, start + 5_000, parent=tool, kind=CLIENT,
               attributes=HTTP)

    # Row 11: a call of another operation that leaves the process is a step when it is a leaf,
    # and a wrapper when a step lies below it; an HTTP call beside that step then stands alone.
    run = runs["row 11"] = b.run(0, 10_000, 10_000)
    b.span("remote op", 0, 1_000, parent=run, kind=CLIENT, attributes={OP: "remote_op"})
    task = b.span("remote task", 1_000, 9_000, parent=run, kind=CLIENT,
                  attributes={OP: "execute_task"})
    b.span("task chat", 1_000, 4_000, parent=task, attributes=CHAT)
    b.span("task http", 5_000, 8_000, parent=task, kind=CLIENT, attributes=HTTP)

    # One call, two nested spans: an instrumentation's model span around an SDK's own, whatever
    # each names the model; a tool around the same tool. The inner one is the step.
    run = runs["nested twins"] = b.run(0, 10_000, 10_000)
    outer = b.span("llm outer", 0, 3_000, parent=run,
                   attributes={OI: "LLM", "llm.model_name": "fake-model"})
    b.span("chat inner", 100, 2_900, parent=outer,
           attributes={OP: "chat", "gen_ai.request.model": "openai/fake-model"}, error=True,
           status_message="Error code: 503 - overloaded")
    tool = b.span("tool outer", 3_000, 6_000, parent=run,
                  attributes={OI: "TOOL", "tool.name": "fetch"})
    b.span("tool inner", 3_100, 5_900, parent=tool,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch"})
    # a tool inside another tool is a nested step, not a twin
    other = b.span("tool caller", 6_000, 9_000, parent=run,
                   attributes={OI: "TOOL", "tool.name": "plan"})
    b.span("tool callee", 6_100, 8_900, parent=other,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch"})

    # Budget steps are the agent's own record: a retry attempt inside its step stays a step;
    # an instrumentation's span inside a budget step of its kind is the wrapper instead.
    run = runs["budget steps"] = b.run(0, 10_000, 10_000)
    fetch = b.step(run, "tool", "fetch", 0, 4_000)
    for attempt, (start, end) in enumerate(((0, 1_000), (1_500, 4_000)), 1):
        b.span(f"attempt {attempt}", start, end, parent=fetch, attributes={
            "budget.step.kind": "tool", "budget.step.name": "fetch", "budget.attempt": attempt})
    model = b.step(run, "model", "gpt-x", 4_000, 8_000,
                   **{"budget.allocated_ms": 5_000, "budget.outcome": "ok"})
    b.span("sdk chat", 4_100, 7_900, parent=model, kind=CLIENT, attributes=CHAT)

    # One call, two sibling spans from two scopes: the inner is the step. From one scope they
    # are two calls, even one inside the other. Two parallel calls, the second inside the
    # first, each recorded twice: two steps, each pairing with its own twin.
    run = runs["sibling twins"] = b.run(0, 10_000, 10_000)
    b.span("chat library", 0, 2_000, parent=run, attributes=CHAT, scope="library")
    b.span("chat sdk", 10, 1_990, parent=run, attributes=CHAT, scope="sdk", error=True,
           status_message="Error code: 429 - rate limited")
    b.span("chat one", 3_000, 5_000, parent=run, attributes=CHAT, scope="sdk")
    b.span("chat two", 3_500, 4_500, parent=run, attributes=CHAT, scope="sdk")
    b.span("first library", 6_000, 9_000, parent=run, attributes=CHAT, scope="library")
    b.span("first sdk", 6_010, 8_990, parent=run, attributes=CHAT, scope="sdk")
    b.span("second library", 7_000, 8_000, parent=run, attributes=CHAT, scope="library")
    b.span("second sdk", 7_010, 7_990, parent=run, attributes=CHAT, scope="sdk")

    # Framework bookkeeping, an MCP client's call, an agent span with no name.
    run = runs["bookkeeping"] = b.run(0, 10_000, 10_000)
    workflow = b.span("agent workflow", 0, 10_000, parent=run, attributes={OI: "AGENT"})
    b.span("tool a", 0, 2_000, parent=workflow,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "a"})
    b.span("tool b", 0, 3_000, parent=workflow,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "b"})
    b.span("merged", 3_000, 3_001, parent=workflow,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "(merged tools)"})
    b.span("tools/call fetch_report", 4_000, 6_000, parent=workflow, kind=CLIENT,
           attributes={"mcp.method.name": "tools/call"})

    # HTTP client spans hung beside their tool (a tracer that does not make its tool span
    # current): inside exactly one tool and no other step, they are the tool's.
    run = runs["beside"] = b.run(0, 10_000, 10_000)
    b.span("lookup", 0, 3_000, parent=run, ok=True,
           attributes={OI: "TOOL", "tool.name": "lookup"})
    b.span("lookup http", 100, 2_900, parent=run, kind=CLIENT,
           attributes={**HTTP, "http.response.status_code": 503})
    # inside two overlapping tools: it stays where it is
    b.span("left", 4_000, 7_000, parent=run, attributes={OI: "TOOL", "tool.name": "left"})
    b.span("right", 4_500, 7_500, parent=run, attributes={OI: "TOOL", "tool.name": "right"})
    b.span("shared http", 5_000, 6_000, parent=run, kind=CLIENT, attributes=HTTP)
    # inside a tool and a model call running beside it: it stays too
    b.span("slow tool", 8_000, 9_900, parent=run, attributes={OI: "TOOL", "tool.name": "slow"})
    b.span("side chat", 8_000, 9_900, parent=run, attributes=CHAT)
    b.span("side http", 8_500, 9_000, parent=run, kind=CLIENT, attributes=HTTP)

    # A span whose parent never arrived counts as a child of the run span.
    run = runs["orphan"] = b.run(0, 10_000, 10_000)
    lost = b.span("lost parent", 0, 9_000, parent=run)
    b.span("orphan chat", 1_000, 3_000, parent=lost, attributes=CHAT)
    runs["lost"] = lost

    # The run's agent: a subagent beside a tool belongs to the service; nested lone agents
    # to the outermost.
    run = runs["agent beside tool"] = b.run(0, 10_000, 10_000)
    sub = b.span("researcher", 0, 5_000, parent=run,
                 attributes={OP: "invoke_agent", "gen_ai.agent.name": "researcher"})
    b.span("researcher chat", 0, 4_000, parent=sub, attributes=CHAT)
    b.span("after tool", 5_000, 9_000, parent=run,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "after"})
    run = runs["nested agents"] = b.run(0, 10_000, 10_000)
    outer_agent = b.span("outer agent", 0, 9_000, parent=run,
                         attributes={OI: "AGENT", "agent.name": "outer"})
    inner_agent = b.span("inner agent", 0, 9_000, parent=outer_agent,
                         attributes={OP: "invoke_agent", "gen_ai.agent.name": "inner"})
    b.span("agent chat", 0, 4_000, parent=inner_agent, attributes=CHAT)

    # A trace whose root never arrives (smolagents never ends the agent span of a run that
    # raised): measured from its earliest span whose parent is missing.
    root = runs["rootless"] = b.span("agent.run", 0, 12_000, attributes={OI: "AGENT"})
    first = b.span("step 1", 1_000, 4_000, parent=root, attributes={OI: "CHAIN"})
    b.span("rootless chat", 1_000, 3_500, parent=first, error=True,
           attributes={OI: "LLM", "llm.model_name": "gpt-x"}, exceptions=["openai.APIError"],
           messages=["Error code: 503 - Service Unavailable"])
    second = b.span("step 2", 5_000, 9_000, parent=root, attributes={OI: "CHAIN"})
    b.span("rootless tool", 5_000, 8_000, parent=second,
           attributes={OI: "TOOL", "tool.name": "search"})
    # Runs nested 40 deep (each span with its own budget): 16 are measured as runs, the deeper
    # ones as part of the 16th; the outermost run's latest end is the deepest span's.
    parent = runs["nested runs"] = b.run(0, 9_000, 10_000)
    for depth in range(1, 40):
        parent = b.span(f"nested run {depth}", depth, 9_000 + (2_000 if depth == 39 else 0),
                        parent=parent, attributes={"budget.total_ms": 10_000 - depth})
    # exception.message decides where the type says nothing (pydantic-ai's own tool timeout)
    run = runs["message"] = b.run(0, 10_000, 10_000)
    b.span("execute_tool fetch", 0, 300, parent=run, error=True,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch"},
           exceptions=["pydantic_ai.exceptions.ToolRetryError"],
           messages=["Timed out after 0.3 seconds."])
    return b, runs


def finished_spans(b: TraceBuilder, runs: dict[str, Any]) -> list:
    """Every span but those that never arrive: the lost parent and the rootless root."""
    missing = {b.span_id(runs["lost"]), b.span_id(runs["rootless"])}
    return [span for span in b.finished() if b.span_id(span) not in missing]


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory):
    b, runs = call_traces()
    con = open_db(tmp_path_factory.mktemp("calls"))
    store(con, finished_spans(b, runs), roots_overdue=True)
    yield con, b, runs
    con.close()


def steps(derived, concern: str) -> dict[str, dict[str, Any]]:
    con, b, runs = derived
    return step_rows(con, b.trace_id(runs[concern]))


def shape(rows: dict[str, dict[str, Any]]) -> dict[str, tuple[str, int, str]]:
    return {name: (row["step_key"], row["step_level"], row["class"])
            for name, row in rows.items()}


def test_event_loop_cycles_are_wrappers(derived) -> None:
    assert shape(steps(derived, "cycles")) == {
        "chat 0": ("model:gpt-x", 0, "ok"), "tool 0": ("tool:search", 0, "ok"),
        "chat 1": ("model:gpt-x", 0, "ok"), "tool 1": ("tool:search", 0, "ok")}
    con, b, runs = derived
    assert run_row(con, b.trace_id(runs["cycles"]))["agent"] == "helper"


def test_row_11_only_for_a_leaf_call_that_leaves_the_process(derived) -> None:
    assert shape(steps(derived, "row 11")) == {
        "remote op": ("other:remote op", 0, "ok"),
        "task chat": ("model:gpt-x", 0, "ok"),
        "task http": ("other:tools.example", 0, "ok")}


def test_one_call_nested_in_two_spans_is_the_inner_step(derived) -> None:
    assert shape(steps(derived, "nested twins")) == {
        "chat inner": ("model:openai/fake-model", 0, "upstream_error"),
        "tool inner": ("tool:fetch", 0, "ok"),
        "tool caller": ("tool:plan", 0, "ok"),
        "tool callee": ("tool:fetch", 1, "ok")}


def test_budget_steps_keep_their_attempts_and_their_record(derived) -> None:
    rows = steps(derived, "budget steps")
    assert {n: (r["step_key"], r["step_level"]) for n, r in rows.items()} == {
        "tool fetch": ("tool:fetch", 0), "attempt 1": ("tool:fetch", 1),
        "attempt 2": ("tool:fetch", 1), "model gpt-x": ("model:gpt-x", 0)}
    assert rows["model gpt-x"]["allocated_ms"] == 5_000


def test_sibling_twins_from_two_scopes_are_one_call(derived) -> None:
    assert shape(steps(derived, "sibling twins")) == {
        "chat sdk": ("model:gpt-x", 0, "upstream_error"),
        # one scope: two parallel calls, however they lie in time
        "chat one": ("model:gpt-x", 0, "ok"), "chat two": ("model:gpt-x", 0, "ok"),
        # two parallel calls, each recorded twice: each span pairs with its own twin
        "first sdk": ("model:gpt-x", 0, "ok"), "second sdk": ("model:gpt-x", 0, "ok")}


def test_bookkeeping_mcp_and_unnamed_agents(derived) -> None:
    assert shape(steps(derived, "bookkeeping")) == {
        "tool a": ("tool:a", 0, "ok"), "tool b": ("tool:b", 0, "ok"),
        "tools/call fetch_report": ("tool:fetch_report", 0, "ok")}
    con, b, runs = derived
    assert run_row(con, b.trace_id(runs["bookkeeping"]))["agent"] == "calls-svc"


def test_http_spans_beside_their_tool_roll_up_into_it(derived) -> None:
    assert shape(steps(derived, "beside")) == {
        # the tool marked OK takes its 503 (SPEC §3 rule 6, whatever the status)
        "lookup": ("tool:lookup", 0, "upstream_error"),
        "left": ("tool:left", 0, "ok"), "right": ("tool:right", 0, "ok"),
        "shared http": ("other:tools.example", 0, "ok"),
        "slow tool": ("tool:slow", 0, "ok"), "side chat": ("model:gpt-x", 0, "ok"),
        "side http": ("other:tools.example", 0, "ok")}


def test_a_span_whose_parent_never_arrived_belongs_to_the_run(derived) -> None:
    assert shape(steps(derived, "orphan")) == {"orphan chat": ("model:gpt-x", 0, "ok")}
    con, b, runs = derived
    assert run_row(con, b.trace_id(runs["orphan"]))["root_missing"] is False


def test_the_runs_agent(derived) -> None:
    con, b, runs = derived
    assert run_row(con, b.trace_id(runs["agent beside tool"]))["agent"] == "calls-svc"
    assert run_row(con, b.trace_id(runs["nested agents"]))["agent"] == "outer"
    assert shape(steps(derived, "nested agents")) == {"agent chat": ("model:gpt-x", 0, "ok")}


def test_a_trace_whose_root_never_arrives_is_measured_from_its_earliest_span(derived) -> None:
    con, b, runs = derived
    trace_id = b.trace_id(runs["rootless"])
    run = run_row(con, trace_id)  # its id is the trace id, as the root's run will be
    assert run["root_missing"] is True
    assert run["start_ns"] == run_row(con, trace_id)["start_ns"]
    assert {n: (r["step_key"], r["class"]) for n, r in steps(derived, "rootless").items()} == {
        "rootless chat": ("model:gpt-x", "upstream_error"),
        "rootless tool": ("tool:search", "ok")}
    assert run["agent"] == "calls-svc"


def test_runs_nest_at_most_16_deep_and_say_so(derived) -> None:
    con, b, runs = derived
    trace_id = b.trace_id(runs["nested runs"])
    assert con.execute("SELECT count(*) FROM runs WHERE trace_id = ?", [trace_id]
                       ).fetchone() == (16,)
    outer = run_row(con, trace_id)
    assert outer["overrun_ms"] == 1_000.0  # the 39th level ended at +11 s, d = +10 s
    assert con.execute("SELECT note FROM derivation_notes WHERE trace_id = ?", [trace_id]
                       ).fetchall() == [("runs_nested_too_deep",)]


def test_exception_message_gives_the_class(derived) -> None:
    assert shape(steps(derived, "message")) == {
        "execute_tool fetch": ("tool:fetch", 0, "client_timeout")}


def test_a_rootless_trace_waits_for_its_grace_then_its_root_replaces_it(tmp_path) -> None:
    b, runs = call_traces()
    rootless = b.trace_id(runs["rootless"])
    spans = [s for s in finished_spans(b, runs) if b.trace_id(s) == rootless]
    root = [s for s in b.finished() if b.span_id(s) == b.span_id(runs["rootless"])]
    con = open_db(tmp_path)
    store(con, spans)  # within the grace period: no run yet, the trace waits
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    assert con.execute("SELECT trace_id FROM traces_awaiting_root").fetchall() == [(rootless,)]
    store(con, [], roots_overdue=True)  # nothing touched: nothing changes
    con.execute("INSERT INTO pending_derivations SELECT trace_id, last_received_at "
                "FROM traces_awaiting_root")
    store(con, [], roots_overdue=True)
    assert run_row(con, rootless)["root_missing"] is True
    assert con.execute("SELECT count(*) FROM traces_awaiting_root").fetchone() == (0,)
    store(con, root)  # the root after all: the same run id, measured from the root
    run = run_row(con, rootless)
    assert run["root_missing"] is False and run["agent"] == "calls-svc"
    assert con.execute("SELECT count(*) FROM runs WHERE trace_id = ?",
                       [rootless]).fetchone() == (1,)


def test_culprit_and_holder_are_numbered_steps(tmp_path) -> None:
    b = TraceBuilder(seed=5)
    run = b.run(0, 6_000, 5_000)
    b.step(run, "tool", "fetch", 0, 3_000)
    b.step(run, "tool", "fetch", 3_000, 4_000)  # ended before the deadline
    b.step(run, "model", "gpt-x", 4_200, 4_500)
    con = open_db(tmp_path)
    store(con, b.finished())
    row = run_row(con, b.trace_id(run))
    assert (row["culprit_step"], row["culprit_key"]) == (1, "tool:fetch")
    # no step was running at the deadline (+5.0 s): the holder is the last step started
    assert (row["holder_step"], row["holder_key"], row["holder_at_deadline"]) == (
        3, "model:gpt-x", False)


def test_run_spans_says_why_each_span_is_or_is_not_a_step(derived, tmp_path) -> None:
    """`budgetscope run RUN_ID --spans`: every span of the trace with what the recognition made
    of it, from the derivation itself (store/derive/explain.py)."""
    from click.testing import CliRunner

    from budgetscope.cli import cli
    from store import explain_trace

    con, b, runs = derived
    table = explain_trace(con, b.trace_id(runs["nested twins"])).set_index("name")
    assert table.loc["llm outer", "role"] == "twin"
    assert table.loc["chat inner", "role"] == "step"
    assert table.loc["tool callee", "why"].startswith("a step nested")
    beside = explain_trace(con, b.trace_id(runs["beside"])).set_index("name")
    assert beside.loc["lookup http", "role"] == "part"
    assert beside.loc["lookup http", "other_span_id"] == beside.loc["lookup", "span_id"]
    assert beside.loc["shared http", "role"] == "step"
    cycles = explain_trace(con, b.trace_id(runs["cycles"])).set_index("name")
    assert cycles.loc["invoke_agent helper", "role"] == "transparent"
    assert "in-process operation" in cycles.loc["cycle 0", "why"]
    assert list(cycles["indent"]) == [0, 1, 2, 3, 3, 4, 2, 3, 3, 4]  # tree order

    cycles_trace = b.trace_id(runs["cycles"])
    own = open_db(tmp_path)
    store(own, [s for s in b.finished() if b.trace_id(s) == cycles_trace])
    own.close()
    # wide enough that no explanation wraps onto a line of its own
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "test.duckdb"), "run",
                                      cycles_trace, "--spans", "--width", "400"])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0] + " " + line.split()[1]: line for line in result.output.splitlines()
             if line.startswith("    ") or line.startswith("      ")}
    assert "transparent" in lines["invoke_agent helper"]
    assert "execute_event_loop_cycle" in lines["cycle 0"]

def test_run_says_when_a_rootless_trace_will_be_measured(tmp_path) -> None:
    from click.testing import CliRunner

    from budgetscope.cli import cli

    b, runs = call_traces()
    rootless = b.trace_id(runs["rootless"])
    con = open_db(tmp_path)
    store(con, [s for s in finished_spans(b, runs) if b.trace_id(s) == rootless])
    con.close()
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "test.duckdb"), "run", rootless])
    assert result.exit_code == 1
    assert "4 spans stored but no run yet" in result.output
    assert "root span has not arrived" in result.output
