"""An agent whose tracer starts its run, tool and model spans without ever making them current (each
span's parent passed by hand, as some instrumentations do), with a plain HTTP client instrumented by
the real opentelemetry-instrumentation-httpx or -requests (argv[1]). With no span current, each HTTP
call the agent makes is the root of a one-span trace of its own: docs/conventions.md, "HTTP client
spans in a trace of their own", joins such a trace to the one model or tool step of another trace of
the service whose interval holds it, and leaves it a run of its own when two steps hold it (parallel
runs of the service) or none does.

A last run makes its run span current but not its model spans: the model's HTTP call hangs from
the run beside the model span (docs/conventions.md, "HTTP client spans beside their call").

The ground truth is what the harness did and saw. Which calls that rule can give to a step is
decided here from the harness's own intervals, as the culprit is (harness.py): a call that two
of the service's steps held while it ran is a run of its own in the truth, with what it got.
Every call is asserted to stand at least MARGIN_MS from the boundaries of the steps of the
runs going on at the same time (a run's own calls and steps follow one another), so that the
spans' clock and the harness's cannot decide it otherwise."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from harness import (
    CLIENT_TIMEOUT_S,
    GENEROUS_TIMEOUT_S,
    MODEL_URL,
    TOOL_URL,
    Run,
    Step,
    Truth,
    now_ns,
    root_span,
    script_model,
    trace_id_of,
    tracer_provider,
)
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

CLIENT = sys.argv[1]  # "httpx" or "requests"
SERVICE = f"stray-{CLIENT}-agent"
HOST = "127.0.0.1"  # docs/conventions.md row 12's name of a stray that stays a run of its own
MODEL = "gpt-4o-mini"
MARGIN_MS = 20.0


@dataclass
class Call:
    """One HTTP request the agent made, timed around the client's call."""

    run: Run  # the run whose step made it (or None when made outside any step)
    step: Step | None
    cls: str
    call: str
    start_ns: int
    end_ns: int


calls: list[Call] = []
held_steps: list[tuple[Run, Step]] = []  # every model and tool step of the service, all runs
lock = threading.Lock()


def make_client() -> tuple[Callable[[str, str, float], tuple[int, dict]],
                          tuple[type, ...]]:
    """(method, url, timeout) → (status, the JSON body of a 2xx model answer or {}), or a
    timeout raised; instrumented by the real library."""
    if CLIENT == "httpx":
        import httpx
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor().instrument()
        session = httpx.Client()
        timeouts: tuple[type, ...] = (httpx.TimeoutException,)

        def send(method: str, url: str, timeout: float) -> tuple[int, dict]:
            body = {"model": MODEL, "messages": []} if method == "POST" else None
            return answered(session.request(method, url, json=body, timeout=timeout))
    else:
        import requests
        from opentelemetry.instrumentation.requests import RequestsInstrumentor

        RequestsInstrumentor().instrument()
        session = requests.Session()
        timeouts = (requests.Timeout,)

        def send(method: str, url: str, timeout: float) -> tuple[int, dict]:
            body = {"model": MODEL, "messages": []} if method == "POST" else None
            return answered(session.request(method, url, json=body, timeout=timeout))
    return send, timeouts


def answered(response) -> tuple[int, dict]:
    """The status, and the body of a model's 2xx answer (its `usage` is what the fake billed)."""
    model_answer = response.is_success if hasattr(response, "is_success") else response.ok
    if model_answer and response.headers.get("content-type", "").startswith("application/json"):
        return response.status_code, response.json()
    return response.status_code, {}


def gen_ai_usage(usage: dict) -> dict[str, int]:
    """The fake's billed `usage` as OpenTelemetry's GenAI conventions spell it on a model span
    (input with its cache, output with its reasoning), as an OpenAI instrumentation sets it
    from the response."""
    return {"gen_ai.usage.input_tokens": usage["prompt_tokens"],
            "gen_ai.usage.output_tokens": usage["completion_tokens"],
            "gen_ai.usage.cache_read.input_tokens":
                usage["prompt_tokens_details"]["cached_tokens"],
            "gen_ai.usage.reasoning.output_tokens":
                usage["completion_tokens_details"]["reasoning_tokens"]}


class Agent:
    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer
        self.send, self.timeouts = make_client()

    def request(self, run: Run, step: Step | None, method: str, url: str, expect: int | str,
                cls: str, path: str) -> dict:
        """The call made; the body of a model's 2xx answer ({} for any other)."""
        timeout = CLIENT_TIMEOUT_S if expect == "timeout" else GENEROUS_TIMEOUT_S
        start = now_ns()
        body: dict = {}
        try:
            status, body = self.send(method, url, timeout)
        except self.timeouts:
            status = "timeout"
        end = now_ns()
        assert status == expect, (path, status)
        with lock:
            calls.append(Call(run, step, cls, f"{method} {path} → {status}", start, end))
        return body

    @contextmanager
    def span(self, run: Run, parent: trace.Span, kind: str, name: str, cls: str, call: str,
             attributes: dict, error: bool = False) -> Iterator[tuple[Step, trace.Span]]:
        """A step's span, started with its parent given by hand and never made current."""
        with run.step(kind, name, cls, call) as step:
            span = self.tracer.start_span(
                f"{'chat' if kind == 'model' else 'execute_tool'} {name}",
                context=trace.set_span_in_context(parent),
                kind=SpanKind.CLIENT if kind == "model" else SpanKind.INTERNAL,
                attributes=attributes)
            try:
                yield step, span
            finally:
                if error:  # the call failed; the span says no more than that
                    span.set_status(Status(StatusCode.ERROR))
                span.end()
        with lock:
            held_steps.append((run, step))

    def tool(self, run: Run, parent: trace.Span, name: str, path: str, expect: int | str,
             cls: str) -> None:
        """A tool whose HTTP call fails or not: it catches the failure and returns its text, so
        its own span carries no evidence (the evidence is on the HTTP span)."""
        with self.span(run, parent, "tool", name, cls, f"GET {path}",
                       {"gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": name}) as (step, _):
            self.request(run, step, "GET", TOOL_URL + path, expect, cls, path)

    def model(self, run: Run, parent: trace.Span, expect: int, cls: str) -> None:
        with self.span(run, parent, "model", MODEL, cls, f"chat → {expect}",
                       {"gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL,
                        "gen_ai.system": "openai"}, error=expect >= 400) as (step, span):
            answer = self.request(run, step, "POST", MODEL_URL + "/chat/completions", expect,
                                  cls, "/v1/chat/completions")
            if "usage" in answer:  # the usage the fake billed, read from its answer
                span.set_attributes(gen_ai_usage(answer["usage"]))

    @contextmanager
    def run_span(self, run: Run, budget_ms: int) -> Iterator[trace.Span]:
        """The run's span, started at the harness's run start and never made current."""
        span = self.tracer.start_span("support run", start_time=run.start_ns,
                                      attributes={"budget.total_ms": budget_ms})
        run.trace_id = trace_id_of(span)
        try:
            yield span
        finally:
            span.end()


def give_strays_their_steps(truth: Truth) -> None:
    """docs/conventions.md on the harness's intervals: a call inside exactly one step of the service
    rolls up into it (the truth's step already has the class the call got); inside two or more, or
    none, it is a run of its own of one `other` step, with what the call got."""
    for made in calls:
        holders = [(run, step) for run, step in held_steps
                   if step.start_ns <= made.start_ns and made.end_ns <= step.end_ns]
        # a run's own steps and calls follow one another, and so do runs one after another
        # (one thread): only the steps of another run going on at the same time could hold a
        # call by a hair
        edges = [abs(edge - mine) / 1e6 for run, step in held_steps
                 if run is not made.run and run.start_ns < made.run.end_ns
                 and made.run.start_ns < run.end_ns
                 for edge in (step.start_ns, step.end_ns)
                 for mine in (made.start_ns, made.end_ns)]
        assert min(edges, default=MARGIN_MS) >= MARGIN_MS, (made.call, min(edges))
        if len(holders) == 1:
            assert holders[0][1] is made.step, made.call
            continue
        alone = Run(SERVICE, None, start_ns=made.start_ns, end_ns=made.end_ns,
                    note=f"a stray held by {len(holders)} steps of the service: a run of its own")
        alone.add(Step("other", HOST, made.cls, made.call, start_ns=made.start_ns,
                       end_ns=made.end_ns))
        truth.runs.append(alone)


def main() -> None:
    provider = tracer_provider(SERVICE)
    tracer = trace.get_tracer("stray-agent")
    agent = Agent(tracer)
    import os

    semconv = os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "default") or "default"
    truth = Truth(f"stray_{CLIENT}", ["opentelemetry-sdk",
                                      "opentelemetry-exporter-otlp-proto-http",
                                      f"opentelemetry-instrumentation-{CLIENT}", CLIENT],
                  semconv=semconv)

    # Run 1: one run, its calls in sequence, every HTTP call a trace of its own. The tools
    # catch their failures (their spans say nothing); the model's span says only ERROR. Between
    # two steps the agent posts a progress write outside any step: held by none, a run of its
    # own.
    script_model({"do": "tool_call", "name": "fetch_report"}, {"do": "status", "code": 503})
    with truth.run(SERVICE, 10_000, note="every call a trace of its own") as run, \
            agent.run_span(run, 10_000) as span:
        agent.model(run, span, 200, "ok")
        agent.tool(run, span, "fetch_report", "/slow", "timeout", "client_timeout")
        time.sleep(0.05)  # the progress write stands clear of the steps around it
        agent.request(run, None, "POST", TOOL_URL + "/write", 201, "ok", "/write")
        time.sleep(0.05)
        agent.tool(run, span, "lookup_invoice", "/503", 503, "upstream_error")
        agent.model(run, span, 503, "upstream_error")

    # Runs 2 and 3: two runs of the service at once. Run 2's tool waits for a slow answer
    # (timed out at 0.3 s); run 3 starts 80 ms later and its tool's quick GET lies inside both
    # tools: a run of its own. Run 2's own call lies inside run 2's tool only: it joins it.
    started = threading.Event()

    def slow_run() -> None:
        with truth.run(SERVICE, 10_000, note="parallel with the next; its call joins its "
                       "tool") as run, agent.run_span(run, 10_000) as span:
            started.set()
            agent.tool(run, span, "fetch_report", "/slow", "timeout", "client_timeout")

    def quick_run() -> None:
        started.wait(5)
        time.sleep(0.08)
        with truth.run(SERVICE, 10_000, note="parallel with the last; its call lies inside "
                       "both runs' tools") as run, agent.run_span(run, 10_000) as span:
            agent.tool(run, span, "lookup_invoice", "/ok", 200, "ok")

    threads = [threading.Thread(target=slow_run), threading.Thread(target=quick_run)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Run 4: the run span current, its model spans not: each model call's POST hangs from the
    # run beside its model span. A slow 2xx (0.2 s, the culprit), then a 503.
    script_model({"do": "slow", "seconds": 0.2}, {"do": "status", "code": 503})
    with truth.run(SERVICE, 10_000, note="HTTP client spans beside their model call") as run, \
            root_span(tracer, run, "support run", {"budget.total_ms": 10_000}) as span:
        run.trace_id = trace_id_of(span)
        agent.model(run, span, 200, "ok")
        agent.model(run, span, 503, "upstream_error")

    provider.shutdown()
    give_strays_their_steps(truth)
    truth.runs.sort(key=lambda run: run.start_ns)
    truth.write()


if __name__ == "__main__":
    main()
