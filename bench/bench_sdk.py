"""What the budget SDK costs an agent per step: `with budget.step(...)` (admission, slice, every
SPEC §2 attribute, the outcome, the record) beside a bare OpenTelemetry span carrying the same
number of attributes, in the same run, both through the OTel SDK's BatchSpanProcessor.

    .venv/bin/python bench/bench_sdk.py --steps 20000 --rounds 5

The exporter behind the batch processor discards what it is given, so the figures are the
caller's cost (the export is the same work for both and happens on the processor's thread).
Rounds alternate bare and SDK so load on a shared machine hits both alike; prints the median
µs per step of each, the SDK's extra µs and the ratio. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "sdk"))

from budgetscope_sdk import LatencyBook, RunBudget  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Tracer  # noqa: E402


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def bare(tracer: Tracer, steps: int) -> float:
    started = time.perf_counter()
    with tracer.start_as_current_span("agent run") as run:
        run.set_attributes({"budget.total_ms": 3_600_000, "budget.deadline_unix_ms": 1,
                            "budget.reserve_ms": 1000})
        for index in range(steps):
            with tracer.start_as_current_span("tool fetch_report") as span:
                # As many attributes as an SDK step carries (kind, name, remaining, cap,
                # allocated, side effect, key, attempt, hedge, gen_ai op and tool name, outcome,
                # effect status).
                span.set_attributes({
                    "budget.step.kind": "tool", "budget.step.name": "fetch_report",
                    "budget.remaining_ms": 3_600_000 - index, "budget.cap_ms": 9000,
                    "budget.allocated_ms": 9000, "budget.side_effect": "write",
                    "budget.idempotency_key": "k", "budget.attempt": 1, "budget.hedge": False,
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch_report"})
                span.set_attribute("budget.outcome", "ok")
                span.set_attribute("budget.effect_status", "completed")
    return (time.perf_counter() - started) / steps * 1e6


def with_sdk(tracer: Tracer, steps: int) -> float:
    latencies = LatencyBook()  # fresh per round, so the fit_only history is the same each time
    started = time.perf_counter()
    with RunBudget(3600, reserve=1, tracer=tracer, latencies=latencies) as budget:
        for _ in range(steps):
            with budget.step("tool", "fetch_report", side_effect="write", cap=9,
                             idempotency_key="k", attempt=1):
                pass
    return (time.perf_counter() - started) / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard(), max_queue_size=65_536))
    tracer = provider.get_tracer("bench_sdk")
    bare(tracer, 1000)
    with_sdk(tracer, 1000)  # warm both paths
    provider.force_flush()
    bare_us: list[float] = []
    sdk_us: list[float] = []
    for _ in range(args.rounds):
        bare_us.append(bare(tracer, args.steps))
        provider.force_flush()
        sdk_us.append(with_sdk(tracer, args.steps))
        provider.force_flush()
    provider.shutdown()
    bare_median, sdk_median = statistics.median(bare_us), statistics.median(sdk_us)
    print(f"steps per round {args.steps}, rounds {args.rounds}, BatchSpanProcessor")
    print(f"bare OTel span with 13 attributes   {bare_median:8.1f} µs/step  "
          f"(rounds: {', '.join(f'{v:.1f}' for v in bare_us)})")
    print(f"budget.step (SDK)                   {sdk_median:8.1f} µs/step  "
          f"(rounds: {', '.join(f'{v:.1f}' for v in sdk_us)})")
    print(f"SDK overhead over the bare span     {sdk_median - bare_median:8.1f} µs/step  "
          f"ratio {sdk_median / bare_median:.2f}x")


if __name__ == "__main__":
    main()
