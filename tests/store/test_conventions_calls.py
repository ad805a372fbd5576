"""The rules of docs/conventions.md for the shapes frameworks give one call, and runs whose spans
are missing: event-loop cycles and other in-process operations, one call recorded as two spans
(nested, or siblings from two instrumentation scopes), framework bookkeeping, HTTP client spans hung
beside their tool, spans whose parent never arrived, traces whose root never arrives, the run's
agent, and the cases that must not merge. Hand-built with the real OpenTelemetry SDK
(tests/support/trace_builder.py, the traces in tests/support/convention_traces.py);
tests/clickhouse/test_conventions_parity.py derives the same traces on ClickHouse and compares every
step and run.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.convention_traces import call_traces, finished_spans
from tests.support.trace_builder import TraceBuilder, open_db, run_row, step_rows, store


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
        # the tool marked OK takes its 503 (docs/metrics.md §3 rule 6, whatever the status)
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
