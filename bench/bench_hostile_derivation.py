"""How long a new run takes to appear while a hostile trace keeps being re-derived, against a
quiet server, in one run.

    .venv/bin/python -m bench.bench_hostile_derivation [--spans 30000] [--seconds 20]

A real receiver with serve's derivation thread, on a fresh file holding one hostile trace: a
chain of `--spans` spans that each carry budget.total_ms (runs nested in runs), the shape that
made every re-derivation walk ~200 rows per run. Then, for `--seconds`, a canary run (three
spans, its root last, as an agent exports it) every 0.5 s over OTLP/HTTP; in the hostile phase
also one exception log record a second into the hostile trace, each of which marks it for
derivation again. Printed: each phase's canary times to appear (from the export's answer to
the run's row), p50 and max, and the hostile/quiet ratio. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.decode.flatten import flatten_request
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner, PendingDerivations, SpanWriter, refresh_touched

CANARY_EVERY_SECONDS = 0.5


def hostile_trace(spans: int) -> tuple[ExportTraceServiceRequest, bytes, bytes]:
    """A chain of nested runs; returns the request, the trace id and its deepest span id."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    trace_id, parent, start = os.urandom(16), b"", time.time_ns() - 60 * 10**9
    for index in range(spans):
        span = scope.spans.add()
        span.trace_id, span.span_id, span.parent_span_id = trace_id, os.urandom(8), parent
        span.name, span.start_time_unix_nano = f"run {index}", start + index
        span.end_time_unix_nano = start + 10**9
        attribute = span.attributes.add()
        attribute.key, attribute.value.int_value = "budget.total_ms", 10_000
        parent = span.span_id
    return request, trace_id, parent


def canary() -> tuple[bytes, str]:
    """A small run (root and two steps, the root ended last); its body and trace id."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    trace_id, root_id, now = os.urandom(16), os.urandom(8), time.time_ns()
    for index, (name, parent) in enumerate((("step a", root_id), ("step b", root_id),
                                            ("canary run", b""))):
        span = scope.spans.add()
        span.trace_id, span.name = trace_id, name
        span.span_id = root_id if not parent else os.urandom(8)
        span.parent_span_id = parent
        span.start_time_unix_nano = now - 10**8 + index
        span.end_time_unix_nano = now
        if not parent:
            attribute = span.attributes.add()
            attribute.key, attribute.value.int_value = "budget.total_ms", 5_000
        else:
            attribute = span.attributes.add()
            attribute.key, attribute.value.string_value = "budget.step.kind", "tool"
    return request.SerializeToString(), trace_id.hex()


def exception_record(trace_id: bytes, span_id: bytes, number: int) -> bytes:
    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add()
    record.trace_id, record.span_id = trace_id, span_id
    record.time_unix_nano, record.severity_number = time.time_ns(), 17
    record.body.string_value = f"failed again ({number})"
    attribute = record.attributes.add()
    attribute.key, attribute.value.string_value = "exception.type", "ValueError"
    return request.SerializeToString()


def post(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/x-protobuf"})
    urllib.request.urlopen(request, timeout=60).read()


def phase(receivers: Receivers, owner: DatabaseOwner, seconds: float,
          trickle: tuple[bytes, bytes] | None) -> list[float]:
    """Canaries for `seconds` (and the trickle when given); each canary's time to appear."""
    traces = receivers.http.endpoint
    logs = traces.replace("/v1/traces", "/v1/logs")
    stop = threading.Event()

    def trickling() -> None:
        number = 0
        while trickle is not None and not stop.wait(1.0):
            number += 1
            post(logs, exception_record(*trickle, number))

    thread = threading.Thread(target=trickling, daemon=True)
    thread.start()
    sent: dict[str, float] = {}
    appeared: dict[str, float] = {}
    cursor = owner.cursor()
    try:
        ends = time.monotonic() + seconds
        next_canary = time.monotonic()
        while time.monotonic() < ends or len(appeared) < len(sent):
            now = time.monotonic()
            if now < ends and now >= next_canary:
                body, trace_id = canary()
                post(traces, body)
                sent[trace_id] = time.monotonic()
                next_canary += CANARY_EVERY_SECONDS
            waiting = [t for t in sent if t not in appeared]
            if waiting:
                found = cursor.execute("SELECT trace_id FROM runs WHERE trace_id IN "
                                       "(SELECT unnest(?::VARCHAR[]))", [waiting]).fetchall()
                for (trace_id,) in found:
                    appeared[trace_id] = time.monotonic()
            if time.monotonic() > ends + 120:
                break
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join()
        cursor.close()
    return [appeared[t] - sent[t] for t in sent if t in appeared]


def summary(times: list[float]) -> str:
    return (f"{len(times)} canaries, p50 {statistics.median(times):.2f} s, "
            f"max {max(times):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=30_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    owner = DatabaseOwner(folder / "hostile.duckdb")
    request, trace_id, deepest = hostile_trace(args.spans)
    cursor = owner.cursor()
    SpanWriter(cursor).write(flatten_request(request))
    started = time.perf_counter()
    PendingDerivations(refresh_touched).run(cursor)
    print(f"hostile trace: {args.spans:,} spans, each a run nested in the one above; "
          f"one derivation {time.perf_counter() - started:.2f} s")
    cursor.close()
    receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0), derive=True)
    receivers.start()
    try:
        quiet = phase(receivers, owner, args.seconds, None)
        print(f"quiet:   {summary(quiet)}")
        hostile = phase(receivers, owner, args.seconds, (trace_id, deepest))
        print(f"hostile: {summary(hostile)} (one exception record a second into the trace)")
        ratio = statistics.median(hostile) / statistics.median(quiet)
        print(f"ratio hostile/quiet: p50 {ratio:.2f}"
              f"x, max {max(hostile) / max(quiet):.2f}x")
    finally:
        receivers.stop(10)
        owner.close()


if __name__ == "__main__":
    main()
