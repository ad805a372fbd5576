"""What confining a derivation failure costs (store/derive/pending.py): deriving a slice of N
traces when all are healthy, beside the same slice with K poisoned traces that the derivation
bisects out (each recorded in derivation_failures, every other trace derived).

    .venv/bin/python -m bench.bench_derivation_isolation [--traces 20000] [--poisoned 0 1 5]

The traces are runs made by the OpenTelemetry SDK (a root and a tool step), stored once; each
scenario derives a copy of that file. A poisoned trace carries what a file written before the
ingest bounds could hold: budget.total_ms = 2^62, which overflows the derivation. Figures are
printed with the ratio to the healthy run, never asserted.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from bench.support.otlp import budget_run
from ingest.decode.proto_flatten import flatten_protobuf
from store import FlatBatch, SpanWriter, connect
from store.testing import PendingDerivations, refresh_touched


def _store(path: Path, traces: int) -> list[str]:
    con = connect(path)
    start = time.time_ns() - 2 * 24 * 3600 * 10**9
    spans = []
    for index in range(traces):
        spans += budget_run("budget.reserve_ms", 100, start + index * 10**7)
    batch = FlatBatch()
    for offset in range(0, len(spans), 2000):
        body = encode_spans(spans[offset:offset + 2000]).SerializeToString()
        batch.extend(flatten_protobuf(body))
    SpanWriter(con).write(batch)
    trace_ids = sorted(set(batch.spans["trace_id"]))
    con.close()
    return trace_ids


def _derive(path: Path, poisoned: list[str]) -> tuple[float, int, int]:
    con = connect(path)
    for trace_id in poisoned:
        con.execute("UPDATE spans SET budget_total_ms = 4611686018427387904 "
                    "WHERE trace_id = ? AND parent_span_id IS NULL", [trace_id])
    derivations = PendingDerivations(refresh_touched)
    started = time.perf_counter()
    derived = derivations.run(con)
    seconds = time.perf_counter() - started
    failed = derivations.failed(con)
    con.close()
    return seconds, derived, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--poisoned", type=int, nargs="*", default=[0, 1, 5])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        stored = Path(folder) / "stored.duckdb"
        trace_ids = _store(stored, args.traces)
        baseline = None
        for count in args.poisoned:
            copy = Path(folder) / f"poisoned-{count}.duckdb"
            shutil.copy(stored, copy)
            step = max(len(trace_ids) // max(count, 1), 1)
            seconds, derived, failed = _derive(copy, trace_ids[step // 2::step][:count])
            baseline = baseline or seconds
            print(f"{args.traces:,} traces, {count} poisoned: {seconds:6.2f} s "
                  f"({seconds / baseline:4.1f}x the first), {derived:,} derived, "
                  f"{failed} recorded as failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
