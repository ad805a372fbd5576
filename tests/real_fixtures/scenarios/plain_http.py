"""A hand-written agent with no GenAI instrumentation: its own root span carries budget.total_ms,
and every call it makes goes through a plain HTTP client instrumented by the real
opentelemetry-instrumentation-httpx or -requests (argv[1]). docs/conventions.md row 12 makes each of
those CLIENT spans a step of kind `other`, named by the host."""

from __future__ import annotations

import sys

from harness import (
    CLIENT_TIMEOUT_S,
    GENEROUS_TIMEOUT_S,
    MODEL_URL,
    TOOL_URL,
    Truth,
    root_span,
    trace_id_of,
    tracer_provider,
)

CLIENT = sys.argv[1]  # "httpx" or "requests"
# docs/conventions.md row 12 names the step by the host, with no url.template/http.route after it
HOST = "127.0.0.1"


def make_client():
    if CLIENT == "httpx":
        import httpx
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor().instrument()
        session = httpx.Client()
        timeouts = (httpx.TimeoutException,)

        def get(path: str, timeout: float) -> int:
            return session.get(TOOL_URL + path, timeout=timeout).status_code

        def post(url: str, payload: dict) -> int:
            return session.post(url, json=payload, timeout=GENEROUS_TIMEOUT_S).status_code
    else:
        import requests
        from opentelemetry.instrumentation.requests import RequestsInstrumentor

        RequestsInstrumentor().instrument()
        session = requests.Session()
        timeouts = (requests.Timeout,)

        def get(path: str, timeout: float) -> int:
            return session.get(TOOL_URL + path, timeout=timeout).status_code

        def post(url: str, payload: dict) -> int:
            return session.post(url, json=payload, timeout=GENEROUS_TIMEOUT_S).status_code
    return get, post, timeouts


def main() -> None:
    provider = tracer_provider(f"plain-{CLIENT}-agent")
    get, post, timeouts = make_client()
    from opentelemetry import trace

    tracer = trace.get_tracer("plain-agent")
    packages = ["opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http",
                f"opentelemetry-instrumentation-{CLIENT}", CLIENT]
    import os

    semconv = os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "default") or "default"
    truth = Truth(CLIENT, packages, semconv=semconv)
    agent = f"plain-{CLIENT}-agent"

    def call(run, path: str, expect: int | str, cls: str) -> None:
        timeout = CLIENT_TIMEOUT_S if expect == "timeout" else GENEROUS_TIMEOUT_S
        with run.step("other", HOST, cls, f"GET {path}"):
            try:
                status = get(path, timeout)
            except timeouts:
                status = "timeout"
        assert status == expect, (path, status)

    # Run 1: exhausted. The deadline (150 ms) falls inside the slow call (0.3 s client timeout),
    # which is both the culprit and the holder; the calls after it get nothing of the budget.
    # It comes first, so however slowly a loaded machine makes the others, the deadline is
    # ~150 ms from either end of it.
    with truth.run(agent, 150, note="deadline inside the timed-out GET /slow") as run, \
            root_span(tracer, run, "support run",
                                         attributes={"budget.total_ms": 150}) as root:
        run.trace_id = trace_id_of(root)
        call(run, "/slow", "timeout", "client_timeout")
        call(run, "/ok", 200, "ok")
        call(run, "/503", 503, "upstream_error")
        call(run, "/429", 429, "upstream_error")
        with run.step("other", HOST, "ok", "POST /write", side_effect="write"):
            assert post(TOOL_URL + "/write", {"ticket": 1}) == 201

    # Run 2: within budget. A 503 retried into a 200, a slow success (the culprit), a model
    # call made with the plain client (no GenAI instrumentation: just another HTTP step), then a
    # write; the holder is the last step to start.
    with truth.run(agent, 10_000, note="within budget; holder is the last step") as run, \
            root_span(tracer, run, "support run",
                                         attributes={"budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        call(run, "/flaky", 503, "upstream_error")
        call(run, "/flaky", 200, "ok")
        call(run, "/delay", 200, "ok")
        with run.step("other", HOST, "ok", "POST /v1/chat/completions"):
            assert post(MODEL_URL + "/chat/completions",
                        {"model": "gpt-4o-mini", "messages": []}) == 200
        with run.step("other", HOST, "ok", "POST /write", side_effect="write"):
            assert post(TOOL_URL + "/write", {"ticket": 2}) == 201

    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
