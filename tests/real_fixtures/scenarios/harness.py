"""What every scenario shares, run inside that library's own pinned venv (stdlib and the
OpenTelemetry SDK only): the tracer provider with the real OTLP http/protobuf exporter, the
fake model's script, and the ground-truth log.

The ground truth is what the harness itself did and saw — which call it made, to what, and what
came back (a timeout it caught, a 503 it was served) — timed on its own clock. It never reads a
span. The culprit and holder are computed from those intervals by docs/metrics.md §4's rules."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

MODEL_URL = os.environ.get("FAKE_MODEL_URL", "")
TOOL_URL = os.environ.get("FAKE_TOOL_URL", "")
GRPC_TARGET = os.environ.get("FAKE_GRPC_TARGET", "")
# The client timeout of the calls meant to time out: the fakes' slow answers take SLOW_SECONDS
# (1.5 s). Calls meant to succeed get GENEROUS_TIMEOUT_S, so a loaded machine cannot turn a
# slow success (DELAY_SECONDS, 0.2 s) into a timeout.
CLIENT_TIMEOUT_S = 0.3
GENEROUS_TIMEOUT_S = 5.0


def tracer_provider(service: str) -> Any:
    """The SDK provider exporting with the real OTLP http/protobuf exporter to the capture
    receiver (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, set by the generator)."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def script_model(*actions: dict[str, Any]) -> None:
    """Queue the fake model's next answers. urllib, which no scenario instruments, so the
    harness's own control calls never show up as spans."""
    request = urllib.request.Request(MODEL_URL.removesuffix("/v1") + "/_script",
                                     data=json.dumps(list(actions)).encode(), method="POST")
    urllib.request.urlopen(request, timeout=5).read()


def root_span(tracer: Any, run: Run, name: str, attributes: dict[str, Any]) -> Any:
    """The harness's own root span, started at the instant the harness counts as the run's
    start, so that its deadline s + B is the one the derivation computes."""
    return tracer.start_as_current_span(name, start_time=run.start_ns, attributes=attributes)


def served_model_calls() -> list[dict[str, Any]]:
    """What the fake model served so far, in order, with its own start/end times (ns)."""
    url = MODEL_URL.removesuffix("/v1") + "/_served"
    return json.loads(urllib.request.urlopen(url, timeout=5).read())


def model_requests_so_far() -> int:
    """How many requests the fake model has taken: a run's calls are those it takes while the
    run lasts, and the generator gives the run the usage the fake billed for them."""
    return len(served_model_calls()) if MODEL_URL else 0


def now_ns() -> int:
    return time.time_ns()


@dataclass
class Step:
    kind: str
    name: str
    cls: str
    call: str  # what the harness did, in its own words
    top_level: bool = True
    start_ns: int = 0
    end_ns: int = 0
    side_effect: str | None = None
    declared_write: bool = False  # the harness set budget.side_effect itself


@dataclass
class Run:
    agent: str
    budget_ms: int | None
    trace_id: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    steps: list[Step] = field(default_factory=list)
    note: str = ""
    # the trace's root span never reaches the exporter (an instrumentation that never ends the
    # span of a run that raised): docs/conventions.md roots the run at its earliest orphaned span
    root_missing: bool = False
    # the fake model's requests [first, end) in the order it took them, made by this run
    model_requests: tuple[int, int] = (0, 0)

    @contextmanager
    def step(self, kind: str, name: str, cls: str, call: str, **extra: Any) -> Any:
        """Time one call the harness makes. `cls` is what the harness arranged and then saw
        (it asked the fake for a 503 and caught the 503): the test of the generator checks the
        caught exception matches, so a mis-scripted scenario fails here, not in the fixture."""
        step = Step(kind, name, cls, call, **extra)
        step.start_ns = now_ns()
        try:
            yield step
        finally:
            step.end_ns = now_ns()
            self.steps.append(step)

    def add(self, step: Step) -> None:
        self.steps.append(step)

    def summary(self) -> dict[str, Any]:
        top = sorted((s for s in self.steps if s.top_level), key=lambda s: s.start_ns)
        culprit, holder, margin, culprit_margin = _culprit_holder(self, top)
        return {
            "agent": self.agent, "budget_ms": self.budget_ms, "trace_id": self.trace_id,
            "root_missing": self.root_missing, "note": self.note,
            "model_requests": list(self.model_requests),
            "elapsed_ms": round((self.end_ns - self.start_ns) / 1e6, 3),
            "steps": [{"kind": s.kind, "name": s.name, "class": s.cls, "call": s.call,
                       "top_level": s.top_level,
                       "start_offset_ms": round((s.start_ns - self.start_ns) / 1e6, 3),
                       "duration_ms": round((s.end_ns - s.start_ns) / 1e6, 3)}
                      for s in sorted(self.steps, key=lambda s: s.start_ns)],
            "culprit": culprit, "holder": holder,
            "deadline_margin_ms": margin,
            "culprit_margin_ms": culprit_margin,
            "writes": [{"kind": s.kind, "name": s.name, "call": s.call,
                        "declared": s.declared_write} for s in self.steps
                       if s.side_effect == "write"],
        }


def _culprit_holder(run: Run, top: list[Step]) -> tuple[Any, Any, float | None, float | None]:
    """docs/metrics.md §4 on the harness's own intervals: equal split of wall clock among the
    top-level steps active at each instant, within [s, min(run end, d)]."""
    if not top or run.budget_ms is None:
        return None, None, None, None
    s = run.start_ns
    d = s + run.budget_ms * 1_000_000
    e = max(s, min(run.end_ns, d))
    points = sorted({s, e, *(min(max(x, s), e) for t in top for x in (t.start_ns, t.end_ns))})
    consumption = [0.0] * len(top)
    for left, right in zip(points, points[1:], strict=False):
        active = [i for i, t in enumerate(top) if t.start_ns <= left and t.end_ns >= right]
        for i in active:
            consumption[i] += (right - left) / len(active)
    best = max(range(len(top)), key=lambda i: (consumption[i], -top[i].start_ns))
    at_d = [i for i, t in enumerate(top) if t.start_ns <= d <= t.end_ns]
    if at_d:
        held = max(at_d, key=lambda i: top[i].start_ns)
    else:
        started = [i for i, t in enumerate(top) if t.start_ns <= run.end_ns]
        held = max(started, key=lambda i: top[i].start_ns) if started else None
    # how far the deadline is from the nearest step boundary: a small margin would make the
    # holder depend on microseconds between the harness's clock and the spans'
    margin = min(abs(d - x) for t in top for x in (t.start_ns, t.end_ns)) / 1e6
    # how much more the culprit consumed than the runner-up: a small one would make the culprit
    # depend on how the harness's intervals and the spans' differ (a lone step has no rival).
    # Where a framework makes the model calls, the harness times them at the fake server: a
    # lower bound of the client's span, which this margin must also cover.
    ranked = sorted(consumption, reverse=True)
    culprit_margin = (ranked[0] - ranked[1]) / 1e6 if len(ranked) > 1 else None

    def describe(i: int | None) -> Any:
        if i is None:
            return None
        return {"index": i, "key": f"{top[i].kind}:{top[i].name}", "call": top[i].call}

    return (describe(best), describe(held), round(margin, 3),
            None if culprit_margin is None else round(culprit_margin, 3))


class Truth:
    def __init__(self, library: str, packages: list[str], semconv: str = "default") -> None:
        self.library = library
        self.packages = packages
        self.semconv = semconv
        self.runs: list[Run] = []
        self.notes: list[str] = []

    @contextmanager
    def run(self, agent: str, budget_ms: int | None, note: str = "") -> Any:
        run = Run(agent, budget_ms, note=note)
        # asked outside the run's interval: the question takes a round trip of its own
        first = model_requests_so_far()
        run.start_ns = now_ns()
        try:
            yield run
        finally:
            run.end_ns = now_ns()
            run.model_requests = (first, model_requests_so_far())
            self.runs.append(run)

    def write(self, path: str | None = None) -> None:
        versions = {}
        for name in self.packages:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                versions[name] = None
        document = {
            "library": self.library, "versions": versions,
            "python": sys.version.split()[0],
            "http_semconv": self.semconv, "notes": self.notes,
            "runs": [run.summary() for run in self.runs],
        }
        target = Path(path or os.environ["TRUTH_PATH"])
        target.write_text(json.dumps(document, indent=1) + "\n")


def summarise_raw(raw: dict[str, Any]) -> dict[str, Any]:
    """A scenario written in another language (the Vercel AI SDK's, in Node) logs its runs and
    steps raw, times in ns; this gives them the same summary, culprit and holder included."""
    runs = []
    for entry in raw.pop("raw_runs"):
        run = Run(entry["agent"], entry["budget_ms"], trace_id=entry.get("trace_id"),
                  start_ns=int(entry["start_ns"]), end_ns=int(entry["end_ns"]),
                  note=entry.get("note", ""), root_missing=entry.get("root_missing", False),
                  model_requests=tuple(entry.get("model_requests", (0, 0))))
        for step in entry["steps"]:
            run.add(Step(step["kind"], step["name"], step["cls"], step["call"],
                         top_level=step.get("top_level", True),
                         start_ns=int(step["start_ns"]), end_ns=int(step["end_ns"]),
                         side_effect=step.get("side_effect"),
                         declared_write=step.get("declared_write", False)))
        runs.append(run.summary())
    return {**raw, "runs": runs}


def trace_id_of(span: Any) -> str:
    return format(span.get_span_context().trace_id, "032x")
