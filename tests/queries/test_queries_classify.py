"""docs/metrics.md §3: every step gets exactly one class, from the first rule that matches.

All cases are steps of one run, built once: each case's span name says what it checks.
"""

from __future__ import annotations

import pytest

from tests.support.trace_builder import TraceBuilder, open_db, step_rows, store

HTTP = "http.response.status_code"
GRPC = "rpc.grpc.status_code"

# name, attributes, exception event types, span status ERROR, expected class
CASES = [
    # rule 1: budget.outcome, whatever else says
    ("r1 stated outcome beats http", {"budget.outcome": "client_timeout", HTTP: 503}, [], True,
     "client_timeout"),
    ("r1 refused", {"budget.outcome": "refused"}, [], False, "refused"),
    ("r1 ok beats error status", {"budget.outcome": "ok"}, ["TimeoutError"], True, "ok"),
    ("r1 unknown value falls through", {"budget.outcome": "meh", HTTP: 404}, [], False,
     "client_error"),
    # rule 2: HTTP
    ("r2 504 is upstream", {HTTP: 504}, [], True, "upstream_error"),
    ("r2 429 is upstream", {HTTP: 429}, [], False, "upstream_error"),
    ("r2 408 is upstream", {HTTP: 408}, [], False, "upstream_error"),
    ("r2 404 is client", {HTTP: 404, GRPC: 4}, [], False, "client_error"),
    ("r2 200 continues to grpc", {HTTP: 200, GRPC: 4}, [], False, "client_timeout"),
    ("r2 302 continues to error.type", {HTTP: 302, "error.type": "Boom"}, [], False, "error"),
    # rule 3: gRPC, int or string names
    ("r3 deadline exceeded", {GRPC: 4}, [], True, "client_timeout"),
    ("r3 cancelled", {GRPC: 1}, [], False, "cancelled"),
    ("r3 unavailable", {GRPC: 14}, [], False, "upstream_error"),
    ("r3 resource exhausted", {GRPC: 8}, [], False, "upstream_error"),
    ("r3 invalid argument", {GRPC: 3}, [], False, "client_error"),
    ("r3 unauthenticated", {GRPC: 16}, [], False, "client_error"),
    ("r3 string name", {"rpc.response.status_code": "DEADLINE_EXCEEDED"}, [], False,
     "client_timeout"),
    ("r3 ok continues", {GRPC: 0, "error.type": "ConnectionResetError"}, [], False,
     "upstream_error"),
    # rule 4: error.type, then exception types, case-insensitive substrings
    ("r4 timeout", {"error.type": "httpx.ReadTimeout"}, [], False, "client_timeout"),
    ("r4 timedout", {"error.type": "SocketTimedOut"}, [], False, "client_timeout"),
    ("r4 deadline", {"error.type": "DeadlineExceeded"}, [], False, "client_timeout"),
    ("r4 timeout before connection", {"error.type": "ConnectionTimeout"}, [], False,
     "client_timeout"),
    ("r4 cancel", {"error.type": "asyncio.CancelledError"}, [], False, "cancelled"),
    ("r4 number 5xx", {"error.type": "503"}, [], False, "upstream_error"),
    # docs/metrics.md §3: a digits-only text is its code, 400-499 → client_error
    ("r4 number 4xx", {"error.type": "404"}, [], False, "client_error"),
    ("r4 unavailable", {"error.type": "ServiceUnavailable"}, [], False, "upstream_error"),
    ("r4 refused", {"error.type": "ConnectionRefusedError"}, [], False, "upstream_error"),
    ("r4 reset", {"error.type": "ECONNRESET"}, [], False, "upstream_error"),
    ("r4 other", {"error.type": "ValueError"}, [], False, "error"),
    # the first text that gives a SPECIFIC class decides; KeyError gives none
    ("r4 error.type before exceptions", {"error.type": "KeyError"}, ["TimeoutError"], False,
     "client_timeout"),
    ("r4 error.type specific wins", {"error.type": "ReadTimeout"}, ["CancelledError"], False,
     "client_timeout"),
    ("r4 first exception decides", {}, ["CancelledError", "TimeoutError"], False, "cancelled"),
    ("r4 exception when error.type empty", {"error.type": ""}, ["ReadTimeout"], False,
     "client_timeout"),
    # rule 5: status
    ("r5 error status", {}, [], True, "error"),
    ("r5 nothing", {}, [], False, "ok"),
]


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    b = TraceBuilder()
    run = b.run(0, 100_000, 100_000)
    for index, (name, attributes, exceptions, error, _) in enumerate(CASES):
        b.span(name, index * 100, index * 100 + 50, parent=run, error=error,
               exceptions=exceptions,
               attributes={"gen_ai.operation.name": "execute_tool",
                           "gen_ai.tool.name": f"t{index}", **attributes})
    con = open_db(tmp_path_factory.mktemp("classify"))
    store(con, b.finished())
    rows = step_rows(con, b.trace_id(run))
    con.close()
    return {name: row["class"] for name, row in rows.items()}


@pytest.mark.parametrize("name,expected", [(case[0], case[4]) for case in CASES])
def test_class(classes, name, expected):
    assert classes[name] == expected


def test_kind_and_name_inference(tmp_path):
    b = TraceBuilder()
    run = b.run(0, 10_000, 10_000)
    op = "gen_ai.operation.name"
    b.span("s1", 0, 1, parent=run, attributes={op: "chat", "gen_ai.request.model": "gpt-x"})
    b.span("s2", 0, 1, parent=run, attributes={op: "text_completion",
                                                "gen_ai.request.model": "m2"})
    b.span("s3", 0, 1, parent=run, attributes={op: "generate_content",
                                                "gen_ai.request.model": "gem"})
    b.span("s4", 0, 1, parent=run, attributes={op: "execute_tool", "gen_ai.tool.name": "grep"})
    b.span("s5", 0, 1, parent=run, attributes={op: "invoke_agent", "gen_ai.agent.name": "sub"})
    b.span("s6", 0, 1, parent=run, attributes={op: "embeddings"})
    b.span("s7", 0, 1, parent=run, attributes={"budget.step.kind": "backoff"})
    b.span("s8", 0, 1, parent=run, attributes={op: "execute_tool", "gen_ai.tool.name": "grep",
                                                "budget.step.name": "grep-v2"})
    b.span("s9", 0, 1, parent=run, attributes={op: "execute_tool"})  # no tool name: span name
    b.span("not a step", 0, 1, parent=run, attributes={"gen_ai.request.model": "x"})
    con = open_db(tmp_path)
    store(con, b.finished())
    keys = {name: row["step_key"] for name, row in step_rows(con, b.trace_id(run)).items()}
    assert keys == {"s1": "model:gpt-x", "s2": "model:m2", "s3": "model:gem", "s4": "tool:grep",
                    # docs/conventions.md row 2: embeddings is a model call
                    "s5": "subagent:sub", "s6": "model:s6", "s7": "backoff:s7",
                    "s8": "tool:grep-v2", "s9": "tool:s9"}
