"""What the budget SDK costs an agent per step, sync and asyncio, beside a bare OpenTelemetry
span carrying as many attributes, in the same run, with and without an exporter.

    .venv/bin/python -m bench.bench_sdk --steps 20000 --rounds 5

- bare span: `tracer.start_as_current_span(...)` with the 13 attributes an SDK step carries
  (kind, name, remaining, cap, allocated, side effect, key, attempt, hedge, the gen_ai
  operation and tool name, then outcome and effect status), in a plain loop (sync) or inside a
  coroutine (asyncio);
- SDK step: `with budget.step(...)` / `async with budget.step(...)` (admission, slice, every
  attribute, the outcome, the record), and `await call.run(coroutine)` inside the async step
  (the slice enforced on the awaited work, which the bare span does not do);
- money: a model step in a run with a time budget only, its usage set as plain attributes
  (`call.span.set_attributes`, what an agent wrote before), against the same step in a run
  with a dollar and a token budget, `max_output_tokens` and a `Price`: its admission holds an
  estimate and allocates its output, `call.record_usage(...)` writes the usage and the cost,
  the exit releases the hold and counts the call (sync and asyncio, in the same rounds);
- without an exporter: a TracerProvider with no span processor (spans are recorded, then
  dropped); with one: BatchSpanProcessor to an exporter that discards what it is given, so the
  figures are the caller's cost (the export is the same work for both, on the processor's
  thread).

Rounds alternate every variant so load on a shared machine hits all alike. Prints the median
µs per step of each, and each SDK path against its bare span (ratio and extra µs) measured in
the same run. Figures, never assertions. `--clock cpu` times with the process's CPU time
instead of the wall clock: on a machine shared with other work, time spent waiting for a core
is then left out of every variant alike.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable, Sequence

from budgetscope_sdk import LatencyBook, Price, RunBudget
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Tracer

clock = time.perf_counter  # --clock cpu: time.process_time

ATTRIBUTES = {
    "budget.step.kind": "tool", "budget.step.name": "fetch_report",
    "budget.remaining_ms": 3_600_000, "budget.cap_ms": 9000, "budget.allocated_ms": 9000,
    "budget.side_effect": "write", "budget.idempotency_key": "k", "budget.attempt": 1,
    "budget.hedge": False, "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "fetch_report"}


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def bare_sync(tracer: Tracer, steps: int) -> float:
    started = clock()
    with tracer.start_as_current_span("agent run") as run:
        run.set_attributes({"budget.total_ms": 3_600_000, "budget.deadline_unix_ms": 1,
                            "budget.reserve_ms": 1000})
        for _ in range(steps):
            with tracer.start_as_current_span("tool fetch_report") as span:
                span.set_attributes(ATTRIBUTES)
                span.set_attributes({"budget.outcome": "ok",
                                     "budget.effect_status": "completed"})
    return (clock() - started) / steps * 1e6


def sdk_sync(tracer: Tracer, steps: int) -> float:
    latencies = LatencyBook()  # fresh per round, so the fit_only history is the same each time
    started = clock()
    with RunBudget(3600, reserve=1, tracer=tracer, latencies=latencies) as budget:
        for _ in range(steps):
            with budget.step("tool", "fetch_report", side_effect="write", cap=9,
                             idempotency_key="k", attempt=1) as call:
                call.set_outcome("ok")
    return (clock() - started) / steps * 1e6


async def _nothing() -> None:
    return None


def bare_async(tracer: Tracer, steps: int) -> float:
    async def loop() -> float:
        started = clock()
        with tracer.start_as_current_span("agent run") as run:
            run.set_attributes({"budget.total_ms": 3_600_000, "budget.deadline_unix_ms": 1,
                                "budget.reserve_ms": 1000})
            for _ in range(steps):
                with tracer.start_as_current_span("tool fetch_report") as span:
                    span.set_attributes(ATTRIBUTES)
                    await _nothing()  # the tool's await, the same in every variant
                    span.set_attributes({"budget.outcome": "ok",
                                         "budget.effect_status": "completed"})
        return (clock() - started) / steps * 1e6

    return asyncio.run(loop())


def sdk_async(tracer: Tracer, steps: int) -> float:
    async def loop() -> float:
        latencies = LatencyBook()
        started = clock()
        async with RunBudget(3600, reserve=1, tracer=tracer, latencies=latencies) as budget:
            for _ in range(steps):
                async with budget.step("tool", "fetch_report", side_effect="write", cap=9,
                                       idempotency_key="k", attempt=1) as call:
                    await _nothing()
                    call.set_outcome("ok")
        return (clock() - started) / steps * 1e6

    return asyncio.run(loop())


def sdk_async_run(tracer: Tracer, steps: int) -> float:
    async def loop() -> float:
        latencies = LatencyBook()
        started = clock()
        async with RunBudget(3600, reserve=1, tracer=tracer, latencies=latencies) as budget:
            for _ in range(steps):
                async with budget.step("tool", "fetch_report", side_effect="write", cap=9,
                                       idempotency_key="k", attempt=1) as call:
                    await call.run(_nothing())
                    call.set_outcome("ok")
        return (clock() - started) / steps * 1e6

    return asyncio.run(loop())


PRICE = Price(input=2.5, output=10, cache_read=1.25)
USAGE = {"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 300,
         "gen_ai.usage.cache_read.input_tokens": 1000}


def model_sync(tracer: Tracer, steps: int) -> float:
    latencies = LatencyBook()
    started = clock()
    with RunBudget(3600, reserve=1, tracer=tracer, latencies=latencies) as budget:
        for _ in range(steps):
            with budget.step("model", "gpt", cap=9) as call:
                call.span.set_attributes(USAGE)
                call.set_outcome("ok")
    return (clock() - started) / steps * 1e6


def money_sync(tracer: Tracer, steps: int) -> float:
    latencies = LatencyBook()
    started = clock()
    with RunBudget(3600, reserve=1, tracer=tracer, latencies=latencies, usd=10**6,
                   tokens=10**15, reserve_usd=1) as budget:
        for _ in range(steps):
            with budget.step("model", "gpt", cap=9, max_output_tokens=1000,
                             price=PRICE) as call:
                call.record_usage(input_tokens=1200, output_tokens=300, cache_read=1000)
                call.set_outcome("ok")
    return (clock() - started) / steps * 1e6


def model_async(tracer: Tracer, steps: int) -> float:
    async def loop() -> float:
        latencies = LatencyBook()
        started = clock()
        async with RunBudget(3600, reserve=1, tracer=tracer, latencies=latencies) as budget:
            for _ in range(steps):
                async with budget.step("model", "gpt", cap=9) as call:
                    await _nothing()
                    call.span.set_attributes(USAGE)
                    call.set_outcome("ok")
        return (clock() - started) / steps * 1e6

    return asyncio.run(loop())


def money_async(tracer: Tracer, steps: int) -> float:
    async def loop() -> float:
        latencies = LatencyBook()
        started = clock()
        async with RunBudget(3600, reserve=1, tracer=tracer, latencies=latencies, usd=10**6,
                             tokens=10**15, reserve_usd=1) as budget:
            for _ in range(steps):
                async with budget.step("model", "gpt", cap=9, max_output_tokens=1000,
                                       price=PRICE) as call:
                    await _nothing()
                    call.record_usage(input_tokens=1200, output_tokens=300, cache_read=1000)
                    call.set_outcome("ok")
        return (clock() - started) / steps * 1e6

    return asyncio.run(loop())


VARIANTS: dict[str, Callable[[Tracer, int], float]] = {
    "bare span, sync": bare_sync, "budget.step, sync": sdk_sync,
    "bare span, asyncio": bare_async, "budget.step, asyncio": sdk_async,
    "budget.step + call.run": sdk_async_run,
    "model step, sync": model_sync, "model step + money, sync": money_sync,
    "model step, asyncio": model_async, "model step + money, asyncio": money_async,
}
AGAINST = {"budget.step, sync": "bare span, sync", "budget.step, asyncio": "bare span, asyncio",
           "budget.step + call.run": "bare span, asyncio",
           "model step + money, sync": "model step, sync",
           "model step + money, asyncio": "model step, asyncio"}


def providers() -> dict[str, TracerProvider]:
    plain = TracerProvider()
    batched = TracerProvider()
    batched.add_span_processor(BatchSpanProcessor(Discard(), max_queue_size=65_536))
    return {"no exporter": plain, "BatchSpanProcessor": batched}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall: time.perf_counter; cpu: the process's CPU time")
    args = parser.parse_args()
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    setups = providers()
    figures: dict[tuple[str, str], list[float]] = {}
    for provider in setups.values():
        tracer = provider.get_tracer("bench_sdk")
        for measure in VARIANTS.values():
            measure(tracer, 1000)  # warm every path
        provider.force_flush()
    for _ in range(args.rounds):
        for setup, provider in setups.items():
            tracer = provider.get_tracer("bench_sdk")
            for name, measure in VARIANTS.items():
                figures.setdefault((setup, name), []).append(measure(tracer, args.steps))
                provider.force_flush()
    for provider in setups.values():
        provider.shutdown()
    print(f"steps per round {args.steps}, rounds {args.rounds}, {args.clock} clock; median µs "
          "per step (rounds)")
    for setup in setups:
        print(f"\n{setup}")
        median = {name: statistics.median(figures[(setup, name)]) for name in VARIANTS}
        for name in VARIANTS:
            rounds = ", ".join(f"{value:.1f}" for value in figures[(setup, name)])
            line = f"  {name:28} {median[name]:7.1f} µs  ({rounds})"
            if name in AGAINST:
                base = median[AGAINST[name]]
                line += (f"  {median[name] / base:.2f}x {AGAINST[name]}, "
                         f"{median[name] - base:+.1f} µs")
            print(line)


if __name__ == "__main__":
    main()
