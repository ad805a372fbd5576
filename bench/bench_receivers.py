"""Live OTLP/HTTP ingest: spans/s committed by the receivers, beside bare decode-and-flatten
speed of the same payloads, with request latency and a dashboard-sized query while loading.

    .venv/bin/python -m bench.bench_receivers [--seconds 20] [--exporters 4 16] [--spans 512]

Against another revision, in one run, rounds alternated (bench/ab.py; --own-bench where the
base's bench cannot import this tree's packages, as across the store's split into rooms):

    .venv/bin/python -m bench.ab --base REV --own-bench -- bench.bench_receivers --seconds 10

One process plays `budgetscope serve` (receivers, group-commit writer, and a dashboard reader
on its own cursor, exactly as serve wires them); a forked process plays the exporters: N threads,
each with a keep-alive connection, POSTing pre-serialized protobuf requests of `--spans` spans
(distinct ids, so every span is a real insert) back to back. A 200 means committed, so spans/s
committed = spans acknowledged / wall time. Figures are printed, never asserted.

Scenarios, each on a fresh database: the first exporter count as serve runs (a second thread
derives runs/steps beside the writer, after its commits, at most every second), the same without
derivation (the receivers and writer alone), then the other exporter counts with it.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from budgetscope.gc_tuning import relax_gc_for_ingest
from ingest.decode.proto_flatten import flatten_protobuf
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner

SPANS_PER_TRACE = 32
TOOLS = ("fetch_report", "search_docs", "write_ticket", "run_sql", "send_email")
MODELS = ("gpt-x", "claude-y", "gemini-z")
DASHBOARD_QUERIES = {
    "totals": "SELECT count(*), count(DISTINCT trace_id) FROM spans",
    "by step": "SELECT service_name, budget_step_kind, gen_ai_tool_name, count(*) AS n, "
               "quantile_cont((end_ns - start_ns) / 1e6, 0.99) AS p99_ms "
               "FROM spans GROUP BY ALL ORDER BY n DESC",
}


def _set(span: object, key: str, value: object) -> None:
    attribute = span.attributes.add()  # type: ignore[attr-defined]
    attribute.key = key
    if isinstance(value, bool):
        attribute.value.bool_value = value
    elif isinstance(value, int):
        attribute.value.int_value = value
    else:
        attribute.value.string_value = str(value)


def _template(rng: random.Random, spans: int, now: int) -> ExportTraceServiceRequest:
    """One request of `spans` spans: runs of 32 spans (a budgeted root, model and tool steps
    with the docs/metrics.md §2 attributes, some failing with an exception event)."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    _set(resource_spans.resource, "service.name", f"agent-{rng.randrange(4)}")
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "agent.sdk"
    for index in range(spans):
        span = scope_spans.spans.add()
        if index % SPANS_PER_TRACE == 0:
            span.name = "invoke_agent"
            _set(span, "budget.total_ms", 120_000)
            _set(span, "gen_ai.agent.name", "planner")
            span.start_time_unix_nano, span.end_time_unix_nano = now, now + 110 * 10**9
            continue
        start = now + index % SPANS_PER_TRACE * 3 * 10**9
        span.start_time_unix_nano = start
        span.end_time_unix_nano = start + rng.randrange(10**8, 3 * 10**9)
        if index % 2:
            span.name = "chat"
            _set(span, "gen_ai.operation.name", "chat")
            _set(span, "gen_ai.request.model", rng.choice(MODELS))
        else:
            span.name = "execute_tool"
            _set(span, "gen_ai.operation.name", "execute_tool")
            _set(span, "gen_ai.tool.name", rng.choice(TOOLS))
            _set(span, "budget.side_effect", "write" if index % 6 == 0 else "read")
            _set(span, "http.response.status_code", rng.choice((200, 200, 200, 503)))
        _set(span, "budget.remaining_ms", 120_000 - index % SPANS_PER_TRACE * 3000)
        _set(span, "budget.allocated_ms", 30_000)
        _set(span, "budget.attempt", 1)
        if rng.random() < 0.05:
            span.status.code = 2
            event = span.events.add()
            event.name, event.time_unix_nano = "exception", span.end_time_unix_nano
            _set(event, "exception.type", "TimeoutError")
    return request


def make_payloads(count: int, spans: int, seed: int = 7) -> list[bytes]:
    """`count` serialized requests with distinct ids (so every span is a real insert), made by
    giving a few templates fresh trace and span ids (building each from scratch is ~10x
    slower and would dominate the run)."""
    rng = random.Random(seed)
    now = time.time_ns() - 3600 * 10**9
    templates = [_template(rng, spans, now) for _ in range(8)]
    payloads = []
    for number in range(count):
        request = templates[number % len(templates)]
        root_id = b""
        trace_id = b""
        for index, span in enumerate(request.resource_spans[0].scope_spans[0].spans):
            span.span_id = rng.randbytes(8)
            if index % SPANS_PER_TRACE == 0:
                trace_id, root_id = rng.randbytes(16), span.span_id
                span.trace_id = trace_id
            else:
                span.trace_id, span.parent_span_id = trace_id, root_id
        payloads.append(request.SerializeToString())
    return payloads


def bare_decode_and_flatten(payloads: list[bytes], seconds: float = 5.0) -> float:
    """Spans/s of flatten_protobuf alone (the receivers' decode+flatten), one thread, nothing
    stored."""
    done = 0
    started = time.perf_counter()
    for body in payloads:
        done += flatten_protobuf(body).span_count
        if time.perf_counter() - started > seconds:
            break
    return done / (time.perf_counter() - started)


def _exporters(pipe: Connection, payloads: list[bytes], spans: int, exporters: int) -> None:
    """The client process: wait for (host, port, seconds), send, report latencies."""
    host, port, seconds = pipe.recv()
    latencies: list[list[float]] = [[] for _ in range(exporters)]
    refused = [0] * exporters
    stop_at = time.monotonic() + seconds

    def run(worker: int) -> None:
        connection = http.client.HTTPConnection(host, port, timeout=60)
        for body in payloads[worker::exporters]:
            if time.monotonic() > stop_at:
                break
            began = time.perf_counter()
            try:
                connection.request("POST", "/v1/traces", body=body,
                                   headers={"Content-Type": "application/x-protobuf"})
                response = connection.getresponse()
                response.read()
            except OSError:  # counted as refused; a real exporter would retry
                refused[worker] += 1
                connection.close()
                connection = http.client.HTTPConnection(host, port, timeout=60)
                continue
            if response.status == 200:
                latencies[worker].append(time.perf_counter() - began)
            else:
                refused[worker] += 1
        connection.close()

    threads = [threading.Thread(target=run, args=(worker,)) for worker in range(exporters)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pipe.send((time.perf_counter() - began, latencies, refused))


def _query_loop(owner: DatabaseOwner, stop: threading.Event,
                timings: dict[str, list[float]]) -> None:
    cursor = owner.cursor()
    while not stop.wait(1.0):
        for name, sql in DASHBOARD_QUERIES.items():
            began = time.perf_counter()
            cursor.execute(sql).fetchall()
            timings.setdefault(name, []).append(time.perf_counter() - began)
    cursor.close()


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


@dataclass
class Scenario:
    exporters: int
    derive: bool
    client: multiprocessing.process.BaseProcess | None = None
    pipe: Connection | None = None


class DecodeClock:
    """Requests decoded by `intake` (a SpanIntake) and the seconds spent decoding and flattening
    them, counted here rather than in the export path: the benchmark puts a timed wrapper in
    place of the intake's protobuf decoder (its `decode_protobuf`, which every protobuf
    export calls through the instance)."""

    def __init__(self, intake: object) -> None:
        self.requests = 0
        self.seconds = 0.0
        self._lock = threading.Lock()
        decode = intake.decode_protobuf  # type: ignore[attr-defined]

        def timed(body: bytes, where: str) -> object:
            started = time.monotonic()
            try:
                return decode(body, where)
            finally:
                with self._lock:
                    self.requests += 1
                    self.seconds += time.monotonic() - started

        intake.decode_protobuf = timed  # type: ignore[attr-defined]


def run_scenario(scenario: Scenario, spans: int, seconds: float) -> None:
    """Runs one scenario on a fresh database and prints its figures."""
    assert scenario.pipe is not None and scenario.client is not None
    with tempfile.TemporaryDirectory() as folder:
        owner = DatabaseOwner(Path(folder) / "bench.duckdb")
        # Wired as `budgetscope serve` wires it (with the runs/steps derivation after each
        # acknowledged write, unless measuring the receivers and writer without it).
        receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0),
                              derive=scenario.derive)
        decoding = DecodeClock(receivers.traces)
        receivers.start()
        stop_queries = threading.Event()
        timings: dict[str, list[float]] = {}
        reader = threading.Thread(target=_query_loop, args=(owner, stop_queries, timings))
        reader.start()
        cpu_began = time.process_time()  # this process: receivers, writer, derivation, reader
        scenario.pipe.send(("127.0.0.1", receivers.http_port, seconds))
        wall, latencies, refused = scenario.pipe.recv()
        scenario.client.join()
        stop_queries.set()
        reader.join()
        receivers.stop()
        server_cpu = time.process_time() - cpu_began
        stats = receivers.committer.stats
        cursor = owner.cursor()
        stored = cursor.execute("SELECT count(*) FROM spans").fetchone()[0]
        runs = cursor.execute("SELECT count(*) FROM runs").fetchone()[0]
        cursor.close()
        derivations = receivers.committer.derivations
        owner.close()

    every = [latency for worker in latencies for latency in worker]
    acknowledged = len(every) * spans
    label = "with" if scenario.derive else "WITHOUT"
    print(f"\nOTLP/HTTP protobuf, {scenario.exporters} exporters x {spans}-span requests, "
          f"{label} the runs/steps derivation (beside the writer, after its commits), "
          f"{wall:.1f} s:")
    if derivations is not None:
        print(f"  derivation: {derivations.traces_derived:,} traces in "
              f"{derivations.seconds:.1f} s of the derivation thread ({runs:,} runs derived)")
    print(f"  {acknowledged / wall:,.0f} spans/s committed ({acknowledged:,} acknowledged, "
          f"{stored:,} stored, {sum(refused)} refused 503)")
    print(f"  server CPU: {server_cpu / max(acknowledged, 1) * 1e6:.0f} µs per committed span "
          f"({server_cpu:.1f} CPU-s in {wall:.1f} s; at 40k spans/s 2 cores give 50 µs)")
    if every:
        print(f"  request latency: p50 {statistics.median(every) * 1000:.0f} ms, "
              f"p99 {_percentile(every, 0.99) * 1000:.0f} ms, max {max(every) * 1000:.0f} ms")
    print(f"  group commit: {stats.transactions} transactions, "
          f"{stats.spans_written / max(stats.transactions, 1):,.0f} spans and "
          f"{stats.requests / max(stats.transactions, 1):.1f} requests per transaction, "
          f"last one {stats.last_transaction_seconds * 1000:.0f} ms")
    requests = max(decoding.requests, 1)
    print(f"  where a request's time goes (means): decode+flatten "
          f"{decoding.seconds / requests * 1000:.0f} ms (sharing the GIL with the "
          f"others), queued for the writer {stats.queue_wait_seconds / requests * 1000:.0f} ms, "
          f"its transaction {stats.transaction_seconds / max(stats.transactions, 1) * 1000:.0f}"
          f" ms")
    for name, values in timings.items():
        print(f"  dashboard query '{name}' while loading: p50 "
              f"{statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms "
              f"({len(values)} runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per scenario")
    parser.add_argument("--exporters", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--spans", type=int, default=512, help="spans per request")
    parser.add_argument("--skip-without-derivation", action="store_true",
                        help="do not also measure the first exporter count without the hook")
    options = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr] # lines show as made
    relax_gc_for_ingest()  # as `budgetscope serve` runs (budgetscope.cli.main)

    # Enough distinct payloads for a run at 60k spans/s, so no request is a resend.
    count = int(options.seconds * 60_000 / options.spans) + 8 * max(options.exporters)
    began = time.perf_counter()
    payloads = make_payloads(count, options.spans)
    size = sum(map(len, payloads)) / len(payloads)
    print(f"{count} payloads of {options.spans} spans ({size / 1024:.0f} KiB each) built in "
          f"{time.perf_counter() - began:.1f} s; {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.1f} (other work on this machine)")

    scenarios = [Scenario(options.exporters[0], True)]
    if not options.skip_without_derivation:
        scenarios.append(Scenario(options.exporters[0], False))
    scenarios += [Scenario(exporters, True) for exporters in options.exporters[1:]]
    # Fork every client before any server thread exists (forking a threaded process, grpc's
    # above all, is unsafe); the children inherit the payloads without copying them.
    context = multiprocessing.get_context("fork")
    for scenario in scenarios:
        scenario.pipe, theirs = context.Pipe()
        scenario.client = context.Process(target=_exporters, args=(
            theirs, payloads, options.spans, scenario.exporters))
        scenario.client.start()

    bare = bare_decode_and_flatten(payloads)
    print(f"bare decode+flatten of the same payloads (1 thread, nothing stored): "
          f"{bare:,.0f} spans/s")
    del payloads
    try:
        for scenario in scenarios:
            run_scenario(scenario, options.spans, options.seconds)
    finally:
        # A failed scenario must not leave later clients waiting for their start for ever.
        for scenario in scenarios:
            if scenario.client is not None and scenario.client.is_alive():
                scenario.client.terminate()


if __name__ == "__main__":
    main()
