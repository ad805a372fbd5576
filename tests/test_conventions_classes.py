"""SPEC §3 as issue 13 revised it: normalised error texts with their codes, the older
http.status_code, status messages, the OpenAI Agents SDK's timeout result, and rule 6's roll-up
of a nested span's outcome into a step without evidence of its own. Hand-built traces of the
real OpenTelemetry SDK (tests/trace_builder.py)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import SpanKind

from tests.trace_builder import TraceBuilder, open_db, step_rows, store

OP = "gen_ai.operation.name"
TOOL = {OP: "execute_tool", "gen_ai.tool.name": "t"}

# name, attributes, exception types, status ("error", "ok" or ""), status message, expected
TEXT_CASES = [
    ("openai 500", {"error.type": "<class 'openai.InternalServerError'>"}, [], "error", "",
     "upstream_error"),
    ("openai 429", {"error.type": "<class 'openai.RateLimitError'>"}, [], "error", "",
     "upstream_error"),
    ("openai 404", {"error.type": "openai.NotFoundError"}, [], "error", "", "client_error"),
    ("openai auth", {"error.type": "AuthenticationError"}, [], "error", "", "client_error"),
    ("gateway timeout", {"error.type": "GatewayTimeout"}, [], "error", "", "upstream_error"),
    ("qualified timeout", {}, ["httpx.ReadTimeout"], "error", "", "client_timeout"),
    ("short timeout", {}, ["ReadTimeout"], "error", "", "client_timeout"),
    ("message 503", {}, [], "error", "Error code: 503 - The server is overloaded",
     "upstream_error"),
    ("message status 404", {}, [], "error", "HTTP status 404", "client_error"),
    ("message matches nothing", {}, [], "error", "it broke", "error"),
    ("message on an ok span is not read", {}, [], "", "Error code: 503", "ok"),
    ("unspecific then specific", {"error.type": "ToolRetryError"}, ["ConnectTimeout"], "error",
     "", "client_timeout"),
    ("unspecific only", {"error.type": "ToolRetryError"}, [], "", "", "error"),
    ("older http.status_code", {"http.status_code": "503"}, [], "", "", "upstream_error"),
    ("newer http wins", {"http.response.status_code": 200, "http.status_code": 503}, [], "", "",
     "ok"),
    ("agents timeout result", {"output.value": "Tool 'lookup' timed out after 5 seconds."}, [],
     "", "", "client_timeout"),
    ("agents timeout result, genai", {"gen_ai.tool.call.result":
                                      "Tool 'lookup' timed out after 5.0 seconds."}, [], "ok",
     "", "client_timeout"),
    ("result text on an error span", {"output.value": "Tool 'x' timed out after 1 seconds."},
     [], "error", "", "error"),
    ("result text that is no timeout", {"output.value": "the tool 'x' timed out? no"}, [], "",
     "", "ok"),
]


def _status(span_kwargs: dict[str, Any], status: str) -> dict[str, Any]:
    return {**span_kwargs, "error": status == "error", "ok": status == "ok"}


def text_trace() -> tuple[TraceBuilder, Any]:
    b = TraceBuilder(seed=31)
    run = b.run(0, 100_000, 100_000)
    for index, (name, attributes, exceptions, status, message, _) in enumerate(TEXT_CASES):
        b.span(name, index * 10, index * 10 + 5, parent=run, exceptions=exceptions,
               status_message=message, attributes={**TOOL, **attributes},
               **_status({}, status))
    return b, run


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    b, run = text_trace()
    con = open_db(tmp_path_factory.mktemp("texts"))
    store(con, b.finished())
    rows = step_rows(con, b.trace_id(run))
    con.close()
    return {name: row["class"] for name, row in rows.items()}


@pytest.mark.parametrize("name,expected", [(c[0], c[5]) for c in TEXT_CASES])
def test_text_class(texts: dict[str, str], name: str, expected: str) -> None:
    assert texts[name] == expected


def roll_up_trace() -> tuple[TraceBuilder, Any]:
    """Each top-level tool with spans below it; the tool's span name says what it checks."""
    b = TraceBuilder(seed=36)
    run = b.run(0, 100_000, 100_000)
    http = {"http.request.method": "GET", "server.address": "svc"}
    cases: list[tuple[str, str, list[tuple[float, float, dict[str, Any], list[str]]]]] = [
        ("error tool around a 503", "error", [(0, 5, {"http.response.status_code": 503}, [])]),
        ("unset tool around a 503", "", [(0, 5, {"http.response.status_code": 503}, [])]),
        ("ok tool around a 503", "ok", [(0, 5, {"http.response.status_code": 503}, [])]),
        ("retried 503 then 200", "error", [(0, 3, {"http.response.status_code": 503}, []),
                                           (3, 6, {"http.response.status_code": 200}, [])]),
        ("own specific class stays", "error",
         [(0, 5, {"http.response.status_code": 503}, [])]),
        ("fallback error takes a nested timeout", "error",
         [(0, 5, {}, ["httpx.ReadTimeout"])]),
        ("tie on end: later start wins", "error",
         [(0, 6, {"http.response.status_code": 503}, []),
          (2, 6, {"rpc.grpc.status_code": 4}, [])]),
        ("last ending unspecific gives nothing", "error",
         [(0, 3, {"http.response.status_code": 503}, []), (3, 6, {}, ["ValueError"])]),
        ("evidence two levels down", "error", [(0, 5, {"budget.outcome": "cancelled"}, [])]),
    ]
    for index, (name, status, children) in enumerate(cases):
        start = index * 100
        extra = {"error.type": "KeyError"} if "fallback" in name else {}
        if "own specific" in name:
            extra = {"error.type": "ReadTimeout"}
        tool = b.span(name, start, start + 50, parent=run, attributes={**TOOL, **extra},
                      **_status({}, status))
        parent = tool
        if "two levels" in name:
            parent = b.span(f"{name} wrapper", start, start + 10, parent=tool)
        for number, (s, e, attributes, exceptions) in enumerate(children):
            b.span(f"{name} child {number}", start + s, start + e, parent=parent,
                   kind=SpanKind.CLIENT if "http" in str(attributes) else SpanKind.INTERNAL,
                   attributes={**http, **attributes}, exceptions=exceptions)
    return b, run


@pytest.fixture(scope="module")
def rolled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    b, run = roll_up_trace()
    con = open_db(tmp_path_factory.mktemp("rollup"))
    store(con, b.finished())
    rows = step_rows(con, b.trace_id(run))
    con.close()
    return {name: row["class"] for name, row in rows.items()}


@pytest.mark.parametrize("name,expected", [
    ("error tool around a 503", "upstream_error"),
    ("unset tool around a 503", "upstream_error"),
    # SPEC §3 rule 6 rolls up whatever the step's status: several instrumentations (OpenInference
    # among them) mark every tool that returns OK, so OK is no evidence of its own
    ("ok tool around a 503", "upstream_error"),
    ("retried 503 then 200", "error"),  # the last call's 200 gives no class
    ("own specific class stays", "client_timeout"),
    ("fallback error takes a nested timeout", "client_timeout"),
    ("tie on end: later start wins", "client_timeout"),
    ("last ending unspecific gives nothing", "error"),
    ("evidence two levels down", "cancelled"),
])
def test_roll_up(rolled: dict[str, str], name: str, expected: str) -> None:
    assert rolled[name] == expected
