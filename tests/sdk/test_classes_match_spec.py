"""The outcome the budget SDK writes for what a step raised is the class budgetscope derives
from the same span without it (docs/metrics.md §3): each step below is stored twice through the
real ingest path, once as the SDK sent it and once with budget.outcome removed, and both derive
the class the SDK chose."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import openai
import pytest
from budgetscope_sdk import BudgetExhausted, RunBudget, StepTimeout
from opentelemetry.sdk.trace import ReadableSpan

from tests.sdk.support.capture import capture
from tests.support.trace_builder import open_db, store

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def status_error(status: int) -> httpx.HTTPStatusError:
    response = httpx.Response(status, request=REQUEST)
    return httpx.HTTPStatusError(f"Server error '{status}'", request=REQUEST, response=response)


CASES: list[tuple[str, BaseException, str]] = [
    ("our_deadline", StepTimeout("fetch reached its 300 ms deadline", deadline_ms=300),
     "client_timeout"),
    ("builtin_timeout", TimeoutError(), "client_timeout"),
    ("httpx_read_timeout", httpx.ReadTimeout("timed out", request=REQUEST), "client_timeout"),
    ("httpx_connect", httpx.ConnectError("All connection attempts failed", request=REQUEST),
     "upstream_error"),
    ("http_503", status_error(503), "upstream_error"),
    ("http_504", status_error(504), "upstream_error"),
    ("http_429", status_error(429), "upstream_error"),
    ("http_404", status_error(404), "client_error"),
    ("openai_timeout", openai.APITimeoutError(request=REQUEST), "client_timeout"),
    ("openai_rate_limit", openai.RateLimitError(
        "Rate limit reached", response=httpx.Response(429, request=REQUEST), body=None),
     "upstream_error"),
    ("openai_overloaded", openai.InternalServerError(
        "Error code: 503 - The server is overloaded",
        response=httpx.Response(503, request=REQUEST), body=None), "upstream_error"),
    ("cancelled", asyncio.CancelledError(), "cancelled"),
    ("refused_inside", BudgetExhausted("no time left for the nested call"), "refused"),
    ("overloaded_text", RuntimeError("Error code: 503 - The server is overloaded"),
     "upstream_error"),
    ("plain_bug", ValueError("bad plan"), "error"),
]


def without_outcome(span: ReadableSpan) -> ReadableSpan:
    attributes = {k: v for k, v in (span.attributes or {}).items() if k != "budget.outcome"}
    return ReadableSpan(name=span.name, context=span.context, parent=span.parent,
                        resource=span.resource, attributes=attributes, events=span.events,
                        links=span.links, kind=span.kind, status=span.status,
                        start_time=span.start_time, end_time=span.end_time,
                        instrumentation_scope=span.instrumentation_scope)


def test_sdk_outcomes_are_the_classes_budgetscope_derives(tmp_path: Path) -> None:
    spans = capture()
    with RunBudget(60, tracer=spans.tracer) as budget:
        for name, error, _ in CASES:
            with pytest.raises(type(error)), budget.step("tool", name, cap=1):
                raise error
    written = {dict(s.attributes)["budget.step.name"]: dict(s.attributes)["budget.outcome"]
               for s in spans.spans() if "budget.step.kind" in (s.attributes or {})}
    assert written == {name: expected for name, _, expected in CASES}

    for label, stored in (("as sent", spans.spans()),
                          ("without budget.outcome", [without_outcome(s) for s in spans.spans()])):
        con = open_db(tmp_path, f"{label.replace(' ', '_').replace('.', '_')}.duckdb")
        store(con, stored)
        derived = {span_name.removeprefix("tool "): cls for span_name, cls in con.execute(
            "SELECT span_name, class FROM steps").fetchall()}
        con.close()
        if label == "as sent":
            assert derived == written, label
        else:
            # A refusal leaves no evidence of its own but the SDK's word (it raised nothing
            # a span can carry); every other class follows from the span's own evidence.
            expected = {name: cls for name, cls in written.items() if name != "refused_inside"}
            assert {k: v for k, v in derived.items() if k != "refused_inside"} == expected, label
