"""An agent on the OpenAI Python client traced by OpenLLMetry: traceloop-sdk's Traceloop.init
with its openai and requests instrumentations, and its @workflow / @tool decorators around the
agent's own functions (traceloop.span.kind = workflow / tool)."""

from __future__ import annotations

import openai
import requests
from harness import (
    CLIENT_TIMEOUT_S,
    MODEL_URL,
    TOOL_URL,
    Truth,
    script_model,
    trace_id_of,
)
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from traceloop.sdk import Traceloop
from traceloop.sdk.decorators import tool, workflow
from traceloop.sdk.instruments import Instruments

MODEL = "gpt-4o-mini"
AGENT = "openllmetry-agent"  # the resource's service.name: nothing in the spans names an agent


def main() -> None:
    import os

    # Traceloop builds its own tracer provider around the exporter it is given
    Traceloop.init(app_name=AGENT, api_endpoint=os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"],
                   exporter=OTLPSpanExporter(), disable_batch=True, telemetry_enabled=False,
                   instruments={Instruments.OPENAI, Instruments.REQUESTS})
    truth = Truth("openllmetry", ["traceloop-sdk", "opentelemetry-instrumentation-openai",
                                  "opentelemetry-instrumentation-requests", "openai",
                                  "opentelemetry-sdk"])
    client = openai.OpenAI(base_url=MODEL_URL, max_retries=0, timeout=5)
    messages = [{"role": "user", "content": "summarise report 7"}]

    def chat(run, cls: str, call: str) -> None:
        with run.step("model", MODEL, cls, call):
            try:
                client.chat.completions.create(model=MODEL, messages=messages)
                seen = "ok"
            except (openai.InternalServerError, openai.RateLimitError):
                seen = "upstream_error"
        assert seen == cls, (call, seen)

    @tool(name="fetch_report")
    def fetch_report() -> str:
        return requests.get(TOOL_URL + "/slow", timeout=CLIENT_TIMEOUT_S).text

    @tool(name="create_ticket")
    def create_ticket() -> int:
        return requests.post(TOOL_URL + "/write", json={"title": "late"},
                             timeout=CLIENT_TIMEOUT_S).status_code

    @workflow(name="support_request")
    def support_request(run, budget_ms: int) -> None:
        root = trace.get_current_span()
        root.set_attribute("budget.total_ms", budget_ms)
        run.trace_id = trace_id_of(root)
        chat(run, "ok", "chat → tool call fetch_report")
        with run.step("tool", "fetch_report", "client_timeout", "GET /slow (requests timeout)"):
            try:
                fetch_report()
                raise AssertionError("GET /slow did not time out")
            except requests.Timeout:
                pass  # the timeout left the tool function: the tool span records it
        chat(run, "upstream_error", "chat → 503")
        chat(run, "upstream_error", "chat → 429")
        chat(run, "ok", "chat → answer")
        with run.step("tool", "create_ticket", "ok", "POST /write", side_effect="write"):
            assert create_ticket() == 201

    # Run 0: a bare model call, no workflow around it.
    with truth.run(AGENT, None, note="model call with no root of its own") as run:
        chat(run, "ok", "chat (no workflow)")

    # Run 1: the workflow carries the budget; the deadline falls inside the timed-out tool.
    script_model({"do": "tool_call", "name": "fetch_report", "arguments": {}},
                 {"do": "status", "code": 503}, {"do": "status", "code": 429},
                 {"do": "ok", "text": "done"})
    with truth.run(AGENT, 250, note="deadline inside the timed-out fetch_report") as run:
        support_request(run, 250)

    trace.get_tracer_provider().shutdown()
    truth.write()


if __name__ == "__main__":
    main()
