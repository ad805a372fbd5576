"""The span shapes and rules across traces of docs/conventions.md with hand-built spans
(tests/support/convention_traces.py's revised_traces), each rule with the cases that must not merge:
a callable's method, event records, a wrapper exception passed over by the roll-up, HTTP client
spans beside a model call, a model step without a model name, and HTTP client spans in a trace of
their own, decided on the spans stored whatever order they arrive in
(tests/clickhouse/test_conventions_parity.py derives the same spans on ClickHouse)."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from opentelemetry.trace import SpanKind

from tests.support.convention_traces import HTTP, revised_traces
from tests.support.trace_builder import TraceBuilder, open_db, run_row, step_rows, store


@pytest.fixture(scope="module")
def revised(tmp_path_factory: pytest.TempPathFactory):
    b, runs = revised_traces()
    con = open_db(tmp_path_factory.mktemp("revised"))
    store(con, b.finished())
    yield con, b, runs
    con.close()


def _steps(revised, concern: str) -> dict[str, dict[str, Any]]:
    con, b, runs = revised
    return step_rows(con, b.trace_id(runs[concern]))


def _runs_of(con: duckdb.DuckDBPyConnection, trace_id: str) -> int:
    return con.execute("SELECT count(*) FROM runs WHERE trace_id = ?", [trace_id]).fetchone()[0]


def test_a_callables_method_is_not_its_name(revised) -> None:
    steps = _steps(revised, "callable")
    assert steps["fetch_report.__call__"]["step_key"] == "tool:fetch_report"
    assert steps["Planner.__call__"]["step_key"] == "tool:Planner"
    # nothing is left before the ending: the name stays as it is
    assert steps[".__call__"]["step_key"] == "tool:.__call__"


def test_an_event_record_is_not_a_call(revised) -> None:
    con, b, runs = revised
    rows = con.execute("SELECT span_name, step_key, class, is_top_level FROM steps "
                       "WHERE run_id = ? ORDER BY start_ns", [b.trace_id(runs["event records"])]
                       ).fetchall()
    assert rows == [
        # the failed calls stay steps, with their own classes; their `error` children are none
        ("fetch tool", "tool:fetch", "client_timeout", True),
        ("llm call", "model:gpt-x", "upstream_error", True),
        # not merged: a named 0 ms child under a tool of another name is a nested step
        ("search tool", "tool:search", "ok", True),
        ("fetch_report", "tool:fetch_report", "ok", False),
        # nor an unnamed tool with nothing of its kind above it
        ("lonely", "tool:lonely", "ok", True),
    ]


def test_a_later_wrapper_exception_is_passed_over(revised) -> None:
    steps = _steps(revised, "wrapper exception")
    assert steps["wrapped tool"]["class"] == "client_timeout"


def test_http_client_span_beside_its_model_call(revised) -> None:
    steps = _steps(revised, "beside model")
    assert list(steps) == ["chat beside"]
    assert steps["chat beside"]["class"] == "upstream_error"


@pytest.mark.parametrize("service,key", [
    ("named-svc", "model:gpt-4o"),
    ("two-names-svc", "model:Generator.run two-names-svc"),
    ("no-names-svc", "model:Generator.run no-names-svc"),
])
def test_a_model_step_without_a_model_name(revised, service: str, key: str) -> None:
    steps = _steps(revised, f"unnamed {service}")
    assert [row["step_key"] for row in steps.values()] == [key]
    assert next(iter(steps.values()))["class"] == "upstream_error"


def test_another_services_names_are_not_taken(revised) -> None:
    steps = _steps(revised, "unnamed other service")
    assert [row["step_key"] for row in steps.values()] == ["model:Generator.run named-svc"]


def test_http_client_spans_in_a_trace_of_their_own(revised) -> None:
    con, b, runs = revised
    a, run_b = b.trace_id(runs["stray run a"]), b.trace_id(runs["stray run b"])
    # inside one step of another trace of the service: part of it, and no run
    for joined in ("stray in a", "stray in b", "stray in model"):
        assert _runs_of(con, b.trace_id(runs[joined])) == 0, joined
    # inside two overlapping steps (concurrent runs), or none: a run of its own
    for alone in ("stray in both", "stray in none"):
        assert _runs_of(con, b.trace_id(runs[alone])) == 1, alone
    # its evidence rolls up into the step that holds it (the tool of run a said OK)
    assert step_rows(con, a)["tool a"]["class"] == "upstream_error"
    steps_b = step_rows(con, run_b)
    assert steps_b["tool b"]["class"] == "client_timeout"
    assert steps_b["model b"]["class"] == "upstream_error"
    assert run_row(con, a)["steps"] == 1 and run_row(con, run_b)["steps"] == 2


@pytest.mark.parametrize("concern", ["row 9 alone", "budgeted http", "grpc alone",
                                     "other service http", "two spans"])
def test_what_is_no_stray_stays_a_run(revised, concern: str) -> None:
    con, b, runs = revised
    assert _runs_of(con, b.trace_id(runs[concern])) == 1


def test_the_stray_join_is_exposed(revised) -> None:
    """stray_calls keeps what the rule decided (the token and dollar derivation
    reads the same join)."""
    con, b, runs = revised
    joined = dict(con.execute("SELECT trace_id, holder_span_id FROM stray_calls "
                              "WHERE holder_span_id IS NOT NULL").fetchall())
    assert joined == {b.trace_id(runs["stray in a"]): _span_named(b, "tool a"),
                      b.trace_id(runs["stray in b"]): _span_named(b, "tool b"),
                      b.trace_id(runs["stray in model"]): _span_named(b, "model b")}


def _span_named(b: TraceBuilder, name: str) -> str:
    return next(b.span_id(s) for s in b.finished() if s.name == name)


# -- decided on the spans stored, whatever order they arrive in --------------------------------

def _answers(con: duckdb.DuckDBPyConnection, b: TraceBuilder, stray, holders) -> list:
    """(stray's runs, each holder's tool class): one answer for the call at every moment."""
    return [_runs_of(con, b.trace_id(stray))] + [
        con.execute("SELECT class FROM steps WHERE span_id = ?", [b.span_id(h)]).fetchone()[0]
        for h in holders]


def test_a_stray_joins_when_its_step_arrives_and_leaves_when_a_second_does(tmp_path) -> None:
    b = TraceBuilder(seed=461, service="order-svc")
    stray = b.span("GET", 1_000, 2_000, kind=SpanKind.CLIENT,
                   attributes={**HTTP, "http.response.status_code": 503})
    first = b.run(0, 10_000, 10_000)
    tool_1 = b.span("tool 1", 500, 3_000, parent=first, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    second = b.run(0, 10_000, 10_000)
    tool_2 = b.span("tool 2", 800, 2_500, parent=second, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    spans = {b.span_id(s): s for s in b.finished()}

    def batch(*which) -> list:
        return [spans[b.span_id(w)] for w in which]

    con = open_db(tmp_path)
    store(con, batch(stray))
    assert _answers(con, b, stray, []) == [1]
    store(con, batch(first, tool_1))  # its step arrives: it joins, its run goes
    assert _answers(con, b, stray, [tool_1]) == [0, "upstream_error"]
    store(con, batch(second, tool_2))  # a second step holds it: a run again, the first drops it
    assert _answers(con, b, stray, [tool_1, tool_2]) == [1, "ok", "ok"]
    con.close()


def test_a_trace_derived_again_for_one_stray_keeps_the_others_it_holds(tmp_path) -> None:
    """A run arriving later around one stray brings in the trace holding it, which is derived
    again with it; the strays that trace already held, far from the newcomer, stay joined to it
    (they are re-decided on the turn's steps), and one the newcomer's hull holds but none of its
    steps keeps its call."""
    b = TraceBuilder(seed=466, service="kept-svc")
    holder = b.run(0, 20_000, 30_000)
    early = b.span("early tool", 0, 3_000, parent=holder, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    late = b.span("late tool", 10_000, 14_000, parent=holder, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "u"})
    far = b.span("GET far", 1_000, 2_000, kind=SpanKind.CLIENT,
                 attributes={**HTTP, "http.response.status_code": 503})
    shared = b.span("GET shared", 11_000, 12_000, kind=SpanKind.CLIENT,
                    attributes={**HTTP, "http.response.status_code": 429})
    between = b.span("GET between", 12_500, 13_000, kind=SpanKind.CLIENT,
                     attributes={**HTTP, "http.response.status_code": 404})
    newcomer = b.run(9_000, 16_000, 30_000)
    other = b.span("other tool", 10_500, 12_200, parent=newcomer, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    b.span("other model", 14_500, 15_500, parent=newcomer, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})
    later = {b.span_id(s) for s in b.finished() if s.name in ("other tool", "other model")}
    later.add(b.span_id(newcomer))
    finished = b.finished()
    con = open_db(tmp_path)
    store(con, [s for s in finished if b.span_id(s) not in later])
    assert [_runs_of(con, b.trace_id(s)) for s in (far, shared, between)] == [0, 0, 0]
    assert _answers(con, b, shared, [early, late]) == [0, "upstream_error", "client_error"]
    store(con, [s for s in finished if b.span_id(s) in later])
    # `shared` now lies in two calls: a run again; `far` stays with its call, `between` too
    # (inside the newcomer's hull, in none of its steps)
    assert [_runs_of(con, b.trace_id(s)) for s in (far, shared, between)] == [0, 1, 0]
    assert _answers(con, b, far, [early, late, other]) == [
        0, "upstream_error", "client_error", "ok"]
    # the same as every span stored at once
    at_once = open_db(tmp_path, "at_once.duckdb")
    store(at_once, finished)
    derived = "SELECT trace_id, span_id, step_key, class FROM steps ORDER BY ALL"
    assert con.execute(derived).fetchall() == at_once.execute(derived).fetchall()
    at_once.close()
    con.close()


def test_a_strays_usage_follows_its_join(tmp_path) -> None:
    """docs/metrics.md §11.2: a stray's tree is its holder's. Usage an HTTP client span in a
    trace of its own carries is metered in the run of the step it joined (and makes a model
    step above it an aggregate); when a second step holds it and it is a run again, the usage
    is that run's, and the first run counts none of it."""
    b = TraceBuilder(seed=467, service="metered-svc")
    usage = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20}
    stray = b.span("POST", 1_000, 2_000, kind=SpanKind.CLIENT,
                   attributes={**HTTP, "http.request.method": "POST", **usage})
    first = b.run(0, 10_000, 10_000)
    model = b.span("chat m", 500, 3_000, parent=first, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3})
    second = b.run(0, 10_000, 10_000)
    tool = b.span("tool", 800, 2_500, parent=second, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    spans = {b.span_id(s): s for s in b.finished()}

    def tokens() -> dict[str, int]:
        return dict(con.execute("SELECT trace_id, tokens FROM runs").fetchall())

    def metered() -> list[tuple]:
        return con.execute("SELECT trace_id, span_id, top_step_id, is_metered FROM metered_spans"
                           " ORDER BY span_id = ?", [b.span_id(stray)]).fetchall()

    con = open_db(tmp_path)
    store(con, [spans[b.span_id(s)] for s in (stray, first, model)])
    # joined: the model call's run holds the stray's 120 tokens, and the model span is an
    # aggregate above it (its own 10 tokens are not added)
    assert tokens() == {b.trace_id(first): 120}
    assert metered() == [
        (b.trace_id(first), b.span_id(model), b.span_id(model), False),
        (b.trace_id(first), b.span_id(stray), b.span_id(model), True)]
    store(con, [spans[b.span_id(s)] for s in (second, tool)])
    # held by two steps: a run of its own again, with its usage; the model call meters its own
    assert tokens() == {b.trace_id(first): 10, b.trace_id(stray): 120,
                        b.trace_id(second): 0}
    assert metered() == [
        (b.trace_id(first), b.span_id(model), b.span_id(model), True),
        (b.trace_id(stray), b.span_id(stray), b.span_id(stray), True)]
    con.close()


def test_a_stray_that_grows_a_second_span_is_a_trace_again(tmp_path) -> None:
    b = TraceBuilder(seed=462, service="grow-svc")
    run = b.run(0, 10_000, 10_000)
    tool = b.span("tool", 0, 3_000, parent=run, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    stray = b.span("GET", 1_000, 2_000, kind=SpanKind.CLIENT,
                   attributes={**HTTP, "http.response.status_code": 503})
    late = b.span("GET child", 1_100, 1_900, parent=stray, kind=SpanKind.CLIENT,
                  attributes=HTTP)
    con = open_db(tmp_path)
    store(con, [s for s in b.finished() if b.span_id(s) != b.span_id(late)])
    assert _answers(con, b, stray, [tool]) == [0, "upstream_error"]
    store(con, [s for s in b.finished() if b.span_id(s) == b.span_id(late)])
    assert _answers(con, b, stray, [tool]) == [1, "ok"]
    con.close()


def test_a_model_name_arriving_later_renames_the_unnamed_step(tmp_path) -> None:
    b = TraceBuilder(seed=463, service="late-names")
    unnamed_run = b.run(0, 10_000, 10_000)
    unnamed = b.span("Gen.run", 0, 1_000, parent=unnamed_run, error=True,
                     attributes={"openinference.span.kind": "LLM"})
    named_run = b.run(0, 10_000, 10_000)
    b.span("Gen.run", 0, 1_000, parent=named_run,
           attributes={"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o"})
    finished = b.finished()
    first = {b.span_id(unnamed_run), b.span_id(unnamed)}
    con = open_db(tmp_path)
    store(con, [s for s in finished if b.span_id(s) in first])
    key = "SELECT step_key FROM steps WHERE span_id = ?"
    assert con.execute(key, [b.span_id(unnamed)]).fetchone()[0] == "model:Gen.run"
    store(con, [s for s in finished if b.span_id(s) not in first])
    assert con.execute(key, [b.span_id(unnamed)]).fetchone()[0] == "model:gpt-4o"
    con.close()


def test_thousands_of_strays_are_joined_by_bucket(tmp_path) -> None:
    """A busy service whose HTTP client has no parent: 2,000 one-span traces, each inside one of
    2,000 tool calls of its own run, one after the other. Each is joined to its own call; every
    stray is looked up only among the traces of its service whose hull touches its 2^34 ns
    bucket (the join's key: ~35 runs of 500 ms), never among every trace of the service."""
    b = TraceBuilder(seed=464, service="busy-svc")
    count = 2_000
    for number in range(count):
        start = number * 500
        run = b.run(start, start + 400, 10_000)
        b.span(f"tool {number}", start + 10, start + 390, parent=run, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
        b.span(f"GET {number}", start + 20, start + 380, kind=SpanKind.CLIENT, attributes={
            **HTTP, "http.response.status_code": 503})
    con = open_db(tmp_path)
    store(con, b.finished())
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == count
    assert con.execute("SELECT count(*) FROM stray_calls WHERE holder_span_id IS NOT NULL"
                       ).fetchone()[0] == count
    assert con.execute("SELECT count(*) FROM steps WHERE class = 'upstream_error'"
                       ).fetchone()[0] == count
    most = con.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM call_hulls "
                       "GROUP BY service_name, bucket)").fetchone()[0]
    assert most <= 36  # ~17.2 s a bucket, a run every 500 ms
    assert con.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM call_hulls "
                       "GROUP BY trace_id)").fetchone()[0] <= 2  # a hull in one bucket or two
    con.close()


def test_parallel_runs_never_capture_each_others_strays(tmp_path) -> None:
    """Two runs of one service at once whose tool calls overlap in time: the HTTP call inside
    both stays a run of its own; those inside one run's call only are that call's."""
    b = TraceBuilder(seed=465, service="parallel-svc")
    left, right = b.run(0, 5_000, 10_000), b.run(0, 5_000, 10_000)
    tool_l = b.span("tool left", 0, 3_000, parent=left, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    tool_r = b.span("tool right", 1_000, 4_000, parent=right, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    only_left = b.span("GET left", 100, 900, kind=SpanKind.CLIENT,
                       attributes={**HTTP, "http.response.status_code": 503})
    both = b.span("GET both", 1_200, 2_800, kind=SpanKind.CLIENT,
                  attributes={**HTTP, "http.response.status_code": 429})
    only_right = b.span("GET right", 3_100, 3_900, kind=SpanKind.CLIENT,
                        attributes={**HTTP, "http.response.status_code": 404})
    con = open_db(tmp_path)
    store(con, b.finished())
    assert [_runs_of(con, b.trace_id(s)) for s in (only_left, both, only_right)] == [0, 1, 0]
    assert _answers(con, b, both, [tool_l, tool_r]) == [1, "upstream_error", "client_error"]
    con.close()


def test_run_spans_names_each_new_rule(revised) -> None:
    """`budgetscope run RUN_ID --spans` says which of the new rules decided a span's fate."""
    from store import explain_trace

    con, b, runs = revised
    events = explain_trace(con, b.trace_id(runs["event records"]))
    records = events[events["name"] == "error"]
    assert list(records["role"]) == ["part", "part"]  # inside the failed call
    assert all(why.startswith("an event record") for why in records["why"])
    wrapped = explain_trace(con, b.trace_id(runs["wrapper exception"])).set_index("name")
    assert "passed over by the roll-up" in wrapped.loc["framework", "why"]
    beside = explain_trace(con, b.trace_id(runs["beside model"])).set_index("name")
    assert beside.loc["chat http", "why"].startswith("a client call beside its tool or model")
    named = explain_trace(con, b.trace_id(runs["unnamed named-svc"])).set_index("name")
    assert "no model name of its own" in named.loc["Generator.run named-svc", "why"]
    # the holder's trace lists the stray joined to its step, below that step
    held = explain_trace(con, b.trace_id(runs["stray run a"])).set_index("name")
    assert held.loc["GET in a", "role"] == "part"
    assert held.loc["GET in a", "other_span_id"] == held.loc["tool a", "span_id"]
    assert held.loc["GET in a", "indent"] == held.loc["tool a", "indent"] + 1
    assert held.loc["GET in a", "why"].startswith("an HTTP client span in a trace of its own")
    # and the stray's own trace says where it went
    alone = explain_trace(con, b.trace_id(runs["stray in a"]))
    assert list(alone["role"]) == ["part"]
    # a stray held by two steps stays a run
    both = explain_trace(con, b.trace_id(runs["stray in both"]))
    assert list(both["role"]) == ["step"]
    # a preparation names the call after it
    prepared = explain_trace(con, b.trace_id(runs["prep llama"])).set_index("name")
    assert prepared.loc["prepare 1", "role"] == "wrapper"
    assert prepared.loc["prepare 1", "why"].startswith("a preparation of the model call after")
    assert prepared.loc["prepare 1", "other_span_id"] == prepared.loc["achat outer", "span_id"]


# -- a preparation span is not a call -----------------------------------------------------------

def test_a_preparation_span_is_not_a_call(revised) -> None:
    """LlamaIndex's shape: `_prepare_chat_with_tools` (LLM kind, no I/O) before every call.
    The call is one step whatever shows it made one: its POST, its usage, its failure."""
    con, b, runs = revised
    rows = con.execute("SELECT span_name, step_key, class FROM steps WHERE run_id = ? "
                       "ORDER BY start_ns", [b.trace_id(runs["prep llama"])]).fetchall()
    assert rows == [("achat inner", "model:gpt-x", "ok"),
                    ("achat usage only", "model:gpt-x", "ok"),
                    ("achat failed", "model:gpt-x", "upstream_error")]
    assert run_row(con, b.trace_id(runs["prep llama"]))["steps"] == 3


@pytest.mark.parametrize("concern,steps", [
    # two short calls in parallel: neither ends before the other starts
    ("prep parallel", ["parallel 1", "parallel 2"]),
    # a cached answer carries the response: a call of its own
    ("prep cached", ["cached answer", "real call"]),
    # nothing after it shows a call
    ("prep quiet pair", ["quiet 1", "quiet 2"]),
    # the next span is a call of another model, a tool, or the span's own HTTP call beside it
    ("prep other model", ["quiet before other", "other model call"]),
    ("prep tool between", ["quiet before tool", "tool between", "call after tool"]),
    ("prep beside http", ["model not current", "next call"]),
    # a CLIENT span leaves the process; a failed span did something
    ("prep client", ["quiet client", "client call"]),
    ("prep failed", ["quiet failed", "call after failure"]),
])
def test_what_is_no_preparation_stays_a_step(revised, concern: str, steps: list[str]) -> None:
    assert list(_steps(revised, concern)) == steps
