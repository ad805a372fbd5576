"""Bounded soak on 127.0.0.1: exporters at a fixed target rate plus dashboard queries, for
minutes; prints spans/s, request latency, the server's resident memory over time, and whether
any acknowledged span was lost or duplicated.

    .venv/bin/python -m tests.long.soak --minutes 5 --rate 4000 [--exporters 4] [--spans 256]

This process plays `budgetscope serve`, wired as serve wires it: the receivers, the
group-commit writer with the runs/steps derivation, and a dashboard thread running the
dashboard's report queries on its own cursor every second. A forked process plays the
exporters (so their memory and GIL are not the server's): each thread paces keep-alive
OTLP/HTTP protobuf requests to its share of --rate, and like an OTLP exporter resends a
request refused with 503 (after Retry-After, capped at 1 s) until it is acknowledged. Every
span id is new, so at the end the database must hold exactly the acknowledged spans: stored =
distinct = acknowledged. Memory is sampled from /proc/self/status (VmRSS) of this process.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from ingest.receivers.service import ReceiverConfig, Receivers
from queries import reports
from queries.filters import Filters
from store import DatabaseOwner

DASHBOARD_REPORTS = ("database_status", "runs", "attribution", "failures", "utilisation",
                     "weekly")
SPANS_PER_TRACE = 16


def _template(spans: int) -> ExportTraceServiceRequest:
    """Runs of a root (with a budget) and tool/model children, the shapes derivation reads."""
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    attribute = resource.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "soak-agent"
    scope = resource.scope_spans.add()
    for index in range(spans):
        span = scope.spans.add()
        root = index % SPANS_PER_TRACE == 0
        span.name = "invoke_agent soak" if root else f"execute_tool tool{index % 5}"
        for key, value in ((("budget.total_ms", 30_000),) if root else
                           (("gen_ai.operation.name", "execute_tool"),
                            ("gen_ai.tool.name", f"tool{index % 5}"),
                            ("budget.cap_ms", 5_000))):
            attribute = span.attributes.add()
            attribute.key = key
            if isinstance(value, int):
                attribute.value.int_value = value
            else:
                attribute.value.string_value = value
    return request


def _fill_ids(request: ExportTraceServiceRequest, worker: int, sequence: int) -> bytes:
    """Fresh ids (worker and sequence in the trace id, so they never repeat) and times."""
    now = time.time_ns()
    trace_id = root_id = b""
    for index, span in enumerate(request.resource_spans[0].scope_spans[0].spans):
        span.span_id = os.urandom(8)
        if index % SPANS_PER_TRACE == 0:
            trace_id = (bytes([worker]) + sequence.to_bytes(8, "big") + index.to_bytes(2, "big")
                        + os.urandom(5))
            root_id = span.span_id
            span.ClearField("parent_span_id")
            span.start_time_unix_nano, span.end_time_unix_nano = now - 20 * 10**9, now
        else:
            span.parent_span_id = root_id
            span.start_time_unix_nano = now - (20 - index % SPANS_PER_TRACE) * 10**9
            span.end_time_unix_nano = span.start_time_unix_nano + 5 * 10**8
        span.trace_id = trace_id
    return request.SerializeToString()


@dataclass
class ClientReport:
    acknowledged: int = 0  # spans
    requests: int = 0
    refused: int = 0  # 503 answers (each resent)
    errors: int = 0  # connection errors (each resent)
    latencies: list[float] = field(default_factory=list)
    behind_seconds: float = 0.0  # how far the slowest exporter fell behind its pace


def _exporters(pipe: Connection, exporters: int, spans: int, rate: float) -> None:
    """The client process: wait for (port, seconds), send paced requests, report."""
    port, seconds = pipe.recv()
    interval = spans / (rate / exporters)
    reports_: list[ClientReport] = [ClientReport() for _ in range(exporters)]
    began = time.monotonic()
    stop_at = began + seconds

    def run(worker: int) -> None:
        report = reports_[worker]
        request = _template(spans)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        sequence = 0
        while True:
            due = began + (sequence + worker / exporters) * interval
            if due > stop_at:
                break
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            else:
                report.behind_seconds = max(report.behind_seconds, now - due)
            body = _fill_ids(request, worker, sequence)
            sequence += 1
            while True:  # resend until acknowledged, as an OTLP exporter does
                sent = time.perf_counter()
                try:
                    connection.request("POST", "/v1/traces", body=body,
                                       headers={"Content-Type": "application/x-protobuf"})
                    response = connection.getresponse()
                    response.read()
                except OSError:
                    report.errors += 1
                    connection.close()
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    time.sleep(0.2)
                    continue
                if response.status == 200:
                    report.latencies.append(time.perf_counter() - sent)
                    report.acknowledged += spans
                    report.requests += 1
                    break
                report.refused += 1
                time.sleep(min(float(response.getheader("Retry-After") or 1), 1.0))
        connection.close()

    threads = [threading.Thread(target=run, args=(worker,)) for worker in range(exporters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pipe.send((time.monotonic() - began, reports_))


def _dashboard(owner: DatabaseOwner, stop: threading.Event, timings: list[float],
               failures: list[str]) -> None:
    cursor = owner.cursor()
    try:
        while not stop.wait(1.0):
            began = time.perf_counter()
            try:
                for name in DASHBOARD_REPORTS:
                    getattr(reports, name)(cursor, Filters())
            except Exception as error:  # noqa: BLE001 - reported, the soak goes on
                failures.append(f"{type(error).__name__}: {error}")
                continue
            timings.append(time.perf_counter() - began)
    finally:
        cursor.close()


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


@dataclass
class SoakReport:
    seconds: float
    acknowledged: int
    stored: int
    distinct: int
    requests: int
    refused: int
    errors: int
    latencies: list[float]
    memory: list[tuple[float, float, float, int]]  # (s, RSS MB, DuckDB MB, spans stored)
    dashboard_seconds: list[float]
    dashboard_failures: list[str]
    behind_seconds: float

    @property
    def lost(self) -> int:
        return max(self.acknowledged - self.stored, 0)

    @property
    def duplicated(self) -> int:
        return self.stored - self.distinct

    def lines(self, rate: float, exporters: int, spans: int) -> list[str]:
        out = [f"soak: {exporters} exporters x {spans}-span requests at a target of "
               f"{rate:,.0f} spans/s, {self.seconds:.0f} s",
               f"  {self.acknowledged / self.seconds:,.0f} spans/s acknowledged "
               f"({self.acknowledged:,} spans in {self.requests:,} requests; {self.refused} "
               f"answers 503 and {self.errors} connection errors, each resent; the slowest "
               f"exporter fell {self.behind_seconds:.1f} s behind its pace)"]
        if self.latencies:
            out.append(f"  request latency: p50 {statistics.median(self.latencies) * 1000:.0f} "
                       f"ms, p99 {_percentile(self.latencies, 0.99) * 1000:.0f} ms, max "
                       f"{max(self.latencies) * 1000:.0f} ms")
        if self.dashboard_seconds:
            out.append(f"  dashboard reports ({len(DASHBOARD_REPORTS)} queries) while "
                       f"loading: p50 {statistics.median(self.dashboard_seconds) * 1000:.0f} "
                       f"ms, max {max(self.dashboard_seconds) * 1000:.0f} ms "
                       f"({len(self.dashboard_seconds)} rounds, "
                       f"{len(self.dashboard_failures)} failed)")
        out.append("  resident memory of the server (s: RSS, of which DuckDB's own, spans "
                   "stored):")
        out.extend(f"    {at:6.0f} s: {mb:6.0f} MB  {duck:6.0f} MB  {stored:>10,}"
                   for at, mb, duck, stored in self.memory)
        warm = self.memory[1:]  # the first sample is before any request
        if len(warm) >= 4:
            quarter = max(len(warm) // 4, 1)
            first = statistics.mean(mb for _, mb, _, _ in warm[:quarter])
            last = statistics.mean(mb for _, mb, _, _ in warm[-quarter:])
            out.append(f"  RSS after warm-up: first quarter {first:.0f} MB, last quarter "
                       f"{last:.0f} MB ({last / first:.2f}x)")
        out.append(f"  correctness: {self.acknowledged:,} acknowledged, {self.stored:,} "
                   f"stored, {self.lost} lost, {self.duplicated} duplicated")
        return out


def soak(seconds: float, rate: float, exporters: int = 4, spans: int = 256,
         sample_every: float = 5.0, folder: Path | None = None,
         memory_limit: str | None = None) -> SoakReport:
    context = multiprocessing.get_context("fork")
    parent_end, child_end = context.Pipe()
    client = context.Process(target=_exporters, args=(child_end, exporters, spans, rate))
    client.start()  # forked before this process starts any thread
    with tempfile.TemporaryDirectory(prefix="budgetscope-soak-", dir=folder) as scratch:
        owner = DatabaseOwner(Path(scratch) / "soak.duckdb")
        if memory_limit:
            # DuckDB keeps written blocks cached up to its limit (default 80% of RAM), which
            # reads as growth over a long soak; a limit shows what the rest of the server does.
            limiter = owner.cursor()
            limiter.execute("SET memory_limit = ?", [memory_limit])
            limiter.close()
        receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0),
                              derive=True)
        receivers.start()
        stop = threading.Event()
        timings: list[float] = []
        failures: list[str] = []
        dashboard = threading.Thread(target=_dashboard, args=(owner, stop, timings, failures))
        dashboard.start()
        memory: list[tuple[float, float, float, int]] = []
        began = time.monotonic()

        def sample() -> None:
            cursor = owner.cursor()
            while True:
                duck = cursor.execute(
                    "SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0] or 0
                memory.append((time.monotonic() - began, _rss_mb(), duck / 2**20,
                               receivers.committer.stats.spans_inserted))
                if stop.wait(sample_every):
                    cursor.close()
                    return

        sampler = threading.Thread(target=sample)
        sampler.start()
        parent_end.send((receivers.http_port, seconds))
        wall, client_reports = parent_end.recv()
        client.join()
        stop.set()
        dashboard.join()
        sampler.join()
        receivers.stop()
        cursor = owner.cursor()
        duck = cursor.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0]
        memory.append((time.monotonic() - began, _rss_mb(), (duck or 0) / 2**20,
                       receivers.committer.stats.spans_inserted))
        stored, distinct = cursor.execute(
            "SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans").fetchone()
        cursor.close()
        owner.close()
    return SoakReport(
        seconds=wall, acknowledged=sum(r.acknowledged for r in client_reports),
        stored=stored, distinct=distinct, requests=sum(r.requests for r in client_reports),
        refused=sum(r.refused for r in client_reports),
        errors=sum(r.errors for r in client_reports),
        latencies=[latency for r in client_reports for latency in r.latencies],
        memory=memory, dashboard_seconds=timings, dashboard_failures=failures,
        behind_seconds=max(r.behind_seconds for r in client_reports))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=4000.0, help="target spans/s, all "
                        "exporters together")
    parser.add_argument("--exporters", type=int, default=4)
    parser.add_argument("--spans", type=int, default=256, help="spans per request")
    parser.add_argument("--sample-every", type=float, default=15.0, help="seconds between "
                        "memory samples")
    parser.add_argument("--memory-limit", help="DuckDB memory_limit, e.g. 256MB (serve sets "
                        "none: DuckDB's default is 80%% of RAM)")
    args = parser.parse_args()
    report = soak(args.minutes * 60, args.rate, args.exporters, args.spans, args.sample_every,
                  memory_limit=args.memory_limit)
    print("\n".join(report.lines(args.rate, args.exporters, args.spans)))
    for failure in report.dashboard_failures[:5]:
        print(f"  dashboard failure: {failure}")
    bad = report.lost or report.duplicated or report.dashboard_failures
    print("FAILED" if bad else "ok: nothing lost or duplicated")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
