"""Ingestion while retention runs inside the writer: OTLP/HTTP request latency and throughput
before, during and after one retention pass (what `serve --retention-days` does in the
background).

    .venv/bin/python -m bench.bench_retention_ingest --old-traces 20000 --clients 2

A fresh database gets --old-traces traces of 5 spans, 100 days old. Receivers start on
127.0.0.1 as `serve` wires them (group commit, derivation after the write); --clients threads
post requests of 20 new traces × 5 spans, each waiting for its answer. Phases: --seconds
without retention, then one retention pass (--slice-traces per slice), then --seconds after.
Prints per phase: requests, spans/s, latency p50 / p99 / max, non-200 answers. Figures only.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench.bench_retention import request
from ingest.decode.flatten import flatten_request
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner, RetentionSchedule, SpanWriter
from store.testing import DAY_NS

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-traces", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--slice-traces", type=int, default=1_000)
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp(prefix="bench-retention-ingest-")) / "db.duckdb"
    owner = DatabaseOwner(path)
    writer = SpanWriter(owner.cursor())
    old_end = time.time_ns() - 100 * DAY_NS
    for start in range(0, args.old_traces, 1_000):
        writer.write(flatten_request(request(min(1_000, args.old_traces - start), old_end)))
    receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0),
                          derive=True)
    receivers.start()
    url = urlsplit(receivers.http_endpoint)
    samples: list[tuple[float, float, int]] = []  # (answered at, seconds, status)
    stop = threading.Event()

    def client() -> None:
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        while not stop.is_set():
            body = request(20, time.time_ns()).SerializeToString()
            began = time.monotonic()
            connection.request("POST", url.path, body=body,
                               headers={"Content-Type": "application/x-protobuf"})
            response = connection.getresponse()
            response.read()
            samples.append((time.monotonic(), time.monotonic() - began, response.status))
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    phases = []
    began = time.monotonic()
    time.sleep(args.seconds)
    phases.append(("before", began, time.monotonic()))
    schedule = RetentionSchedule(receivers.committer.run_in_writer, 30, str(path),
                                 slice_traces=args.slice_traces)
    began = time.monotonic()
    result = schedule.run_once()
    phases.append(("during", began, time.monotonic()))
    began = time.monotonic()
    time.sleep(args.seconds)
    phases.append(("after", began, time.monotonic()))
    stop.set()
    for thread in threads:
        thread.join(60)
    receivers.stop(30)
    owner.close()
    assert result is not None
    print(f"{args.old_traces:,} old traces ({args.old_traces * 5:,} spans), {args.clients} "
          f"clients × 100-span requests; retention removed {result.traces:,} traces in "
          f"{result.seconds:.2f} s, {result.slices} slices of {args.slice_traces}")
    for name, start, end in phases:
        inside = [(seconds, status) for at, seconds, status in samples if start <= at < end]
        latencies = [seconds for seconds, status in inside if status == 200]
        failed = sum(status != 200 for _, status in inside)
        if not latencies:
            print(f"{name:>6}: no answers")
            continue
        print(f"{name:>6}: {len(inside):>5} requests in {end - start:5.1f} s, "
              f"{len(latencies) * 100 / (end - start):>7,.0f} spans/s, latency p50 "
              f"{statistics.median(latencies) * 1000:6.0f} ms p99 "
              f"{percentile(latencies, 0.99) * 1000:6.0f} ms max "
              f"{max(latencies) * 1000:6.0f} ms, {failed} not 200")


if __name__ == "__main__":
    main()
