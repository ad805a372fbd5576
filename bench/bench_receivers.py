"""Live OTLP/HTTP ingest: spans/s committed by the receivers, beside bare decode-and-flatten
speed of the same payloads, with request latency and a dashboard-sized query while loading.

    .venv/bin/python -m bench.bench_receivers [--seconds 20] [--exporters 4 16] [--spans 512]
        [--baseline-tree DIR]

With --baseline-tree (a checkout of an older commit, e.g. `git worktree add /tmp/old <commit>`),
every scenario runs twice in the same run, on the same payloads: first with that tree's
OTLP/HTTP receiver (ingest/receivers/http_receiver.py and the modules it alone imported, loaded
from DIR), then with this tree's; everything else (exporter, writer, derivation) is this tree's.

With --whole-baseline-tree DIR, the whole bench runs twice in one invocation, each in a process
of its own: first DIR's own bench/bench_receivers.py on DIR's packages (receivers, decoders,
writer, derivation: all of DIR), then this tree's, with the same options; both outputs are
printed and then their spans/s and p99 side by side. For a change that moves code between
packages, where the receiver alone cannot be swapped in.

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
import contextlib
import http.client
import importlib.util
import multiprocessing
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from types import ModuleType

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from budgetscope.gc_tuning import relax_gc_for_ingest
from ingest.decode.proto_flatten import flatten_protobuf
from ingest.receivers import service
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
    with the SPEC §2 attributes, some failing with an exception event)."""
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


# The old receiver's own modules, loaded from the baseline tree in place of this tree's while
# its http_receiver.py is executed (it binds what it imports at that moment).
_BASELINE_MODULES = ("ingest.receivers.limits", "ingest.receivers.connection_guards")


def load_baseline_receiver(tree: Path) -> type:
    """HttpReceiver as the baseline tree has it, under another module name."""
    saved = {name: sys.modules.get(name) for name in _BASELINE_MODULES}
    try:
        for name in _BASELINE_MODULES:
            path = tree / (name.replace(".", "/") + ".py")
            if path.exists():
                sys.modules[name] = _load(f"baseline_{name.rsplit('.', 1)[1]}", path)
        module = _load("baseline_http_receiver", tree / "ingest/receivers/http_receiver.py")
    finally:
        for name, original in saved.items():
            if original is not None:
                sys.modules[name] = original
    return module.HttpReceiver


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def http_receiver_class(receiver: type | None) -> Iterator[None]:
    """Receivers built inside use `receiver` for OTLP/HTTP (None: this tree's)."""
    original = service.HttpReceiver
    service.HttpReceiver = receiver or original  # type: ignore[misc]
    try:
        yield
    finally:
        service.HttpReceiver = original  # type: ignore[misc]


@dataclass
class Scenario:
    exporters: int
    derive: bool
    client: multiprocessing.process.BaseProcess | None = None
    pipe: Connection | None = None
    receiver: type | None = None  # the baseline's HttpReceiver; None: this tree's
    label: str = "this tree"


class DecodeClock:
    """Requests decoded by `intake` (a SpanIntake) and the seconds spent decoding and flattening
    them, counted here rather than in the export path: the benchmark puts a timed wrapper in
    place of the intake's protobuf decoder (its `_decode_protobuf`, which every protobuf
    export calls through the instance)."""

    def __init__(self, intake: object) -> None:
        self.requests = 0
        self.seconds = 0.0
        self._lock = threading.Lock()
        decode = intake._decode_protobuf  # type: ignore[attr-defined]

        def timed(body: bytes, where: str) -> object:
            started = time.monotonic()
            try:
                return decode(body, where)
            finally:
                with self._lock:
                    self.requests += 1
                    self.seconds += time.monotonic() - started

        intake._decode_protobuf = timed  # type: ignore[attr-defined]


def run_scenario(scenario: Scenario, spans: int, seconds: float) -> tuple[float, float]:
    """Prints the figures; returns (spans/s committed, p99 latency in seconds)."""
    assert scenario.pipe is not None and scenario.client is not None
    with tempfile.TemporaryDirectory() as folder:
        owner = DatabaseOwner(Path(folder) / "bench.duckdb")
        # Wired as `budgetscope serve` wires it (with the runs/steps derivation after each
        # acknowledged write, unless measuring the receivers and writer without it).
        with http_receiver_class(scenario.receiver):
            receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0),
                                  derive=scenario.derive)
        decoding = DecodeClock(receivers.exporter)
        receivers.start()
        stop_queries = threading.Event()
        timings: dict[str, list[float]] = {}
        reader = threading.Thread(target=_query_loop, args=(owner, stop_queries, timings))
        reader.start()
        cpu_began = time.process_time()  # this process: receivers, writer, derivation, reader
        scenario.pipe.send(("127.0.0.1", receivers.http.port, seconds))
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
          f"{wall:.1f} s, HTTP receiver of {scenario.label}:")
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
    return acknowledged / wall, _percentile(every, 0.99)


_SCENARIO_LINE = re.compile(r"^OTLP/HTTP protobuf, (?P<exporters>\d+) exporters .*?, "
                            r"(?P<label>with|WITHOUT) the runs/steps", re.MULTILINE)
_RATE_LINE = re.compile(r"^  (?P<rate>[\d,]+) spans/s committed", re.MULTILINE)
_P99_LINE = re.compile(r"^  request latency: .*?p99 (?P<p99>\d+) ms", re.MULTILINE)


def _figures(output: str) -> list[tuple[str, float, float]]:
    """(scenario, spans/s, p99 ms) of each scenario a bench_receivers output reports."""
    figures = []
    for block in output.split("\nOTLP/HTTP protobuf, ")[1:]:
        block = "OTLP/HTTP protobuf, " + block
        scenario, rate, p99 = (_SCENARIO_LINE.search(block), _RATE_LINE.search(block),
                               _P99_LINE.search(block))
        if scenario and rate:
            figures.append((f"{scenario['exporters']} exporters, "
                            f"{scenario['label'].lower()} derivation",
                            float(rate["rate"].replace(",", "")),
                            float(p99["p99"]) if p99 else float("nan")))
    return figures


def compare_whole_trees(baseline: Path, options: argparse.Namespace) -> None:
    arguments = ["--seconds", str(options.seconds), "--spans", str(options.spans),
                 "--exporters", *map(str, options.exporters)]
    if options.skip_without_derivation:
        arguments.append("--skip-without-derivation")
    this_tree = Path(__file__).resolve().parent.parent
    outputs: dict[str, list[list[tuple[str, float, float]]]] = {"baseline": [], "this tree": []}
    # Alternated, so that a change of the machine's load mid-run falls on both trees.
    for round_number in range(options.rounds):
        for name, tree in (("baseline", baseline), ("this tree", this_tree)):
            print(f"== round {round_number + 1}, {name}: {tree}", flush=True)
            done = subprocess.run([sys.executable, str(tree / "bench" / "bench_receivers.py"),
                                   *arguments], cwd=tree, capture_output=True, text=True)
            print(done.stdout + done.stderr[-2000:], flush=True)
            outputs[name].append(_figures(done.stdout))
    print(f"this tree against {baseline}, same options, one run, {options.rounds} round(s) "
          f"alternated (load average {os.getloadavg()[0]:.1f}):")
    for index, (scenario, *_) in enumerate(outputs["baseline"][0]):
        old = [figures[index] for figures in outputs["baseline"] if index < len(figures)]
        new = [figures[index] for figures in outputs["this tree"] if index < len(figures)]
        old_rate = statistics.median(f[1] for f in old)
        new_rate = statistics.median(f[1] for f in new)
        print(f"  {scenario}: median {old_rate:,.0f} -> {new_rate:,.0f} spans/s "
              f"(x{new_rate / max(old_rate, 1):.2f}); per round "
              + ", ".join(f"{o[1]:,.0f}->{n[1]:,.0f}" for o, n in zip(old, new, strict=False))
              + "; p99 ms per round "
              + ", ".join(f"{o[2]:.0f}->{n[2]:.0f}" for o, n in zip(old, new, strict=False)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per scenario")
    parser.add_argument("--exporters", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--spans", type=int, default=512, help="spans per request")
    parser.add_argument("--skip-without-derivation", action="store_true",
                        help="do not also measure the first exporter count without the hook")
    parser.add_argument("--baseline-tree", type=Path, default=None,
                        help="also run each scenario with the OTLP/HTTP receiver of this "
                             "checkout (before this tree's), on the same payloads")
    parser.add_argument("--whole-baseline-tree", type=Path, default=None,
                        help="run this whole bench in that checkout, then in this tree, in "
                             "processes of their own, and compare")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --whole-baseline-tree: alternate the two trees this often")
    options = parser.parse_args()
    if options.whole_baseline_tree is not None:
        compare_whole_trees(options.whole_baseline_tree.resolve(), options)
        return
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
    if options.baseline_tree is not None:
        baseline = load_baseline_receiver(options.baseline_tree.resolve())
        label = f"the baseline {options.baseline_tree}"
        scenarios = [pair for scenario in scenarios for pair in (
            Scenario(scenario.exporters, scenario.derive, receiver=baseline, label=label),
            scenario)]
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
    results = []
    try:
        for scenario in scenarios:
            results.append(run_scenario(scenario, options.spans, options.seconds))
        if options.baseline_tree is not None:
            print("\nthis tree against the baseline, same payloads, same run:")
            for index in range(0, len(scenarios), 2):
                (old_rate, old_p99), (new_rate, new_p99) = results[index:index + 2]
                scenario = scenarios[index + 1]
                print(f"  {scenario.exporters} exporters, "
                      f"{'with' if scenario.derive else 'without'} derivation: "
                      f"{old_rate:,.0f} -> {new_rate:,.0f} spans/s "
                      f"(x{new_rate / max(old_rate, 1):.2f}), p99 {old_p99 * 1000:.0f} -> "
                      f"{new_p99 * 1000:.0f} ms")
    finally:
        # A failed scenario must not leave later clients waiting for their start for ever.
        for scenario in scenarios:
            if scenario.client is not None and scenario.client.is_alive():
                scenario.client.terminate()


if __name__ == "__main__":
    main()
