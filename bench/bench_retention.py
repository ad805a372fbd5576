"""Benchmark of retention: how long a pass and each slice (the time the writer is taken from
the receivers) last, and what happens to the file's size.

    .venv/bin/python -m bench.bench_retention --spans 100000 --slice-traces 1000 2000

For each --slice-traces value: a fresh file with --spans spans 100 days old and --spans a day
old (5 spans a trace, written 5 000 spans a transaction, then CHECKPOINT), one retention pass of
30 days slice by slice (the same steps `serve --retention-days` hands to its writer), then
--spans more new spans. A control file gets the same writes without retention. Prints the pass
and slice durations, removal rate, and file bytes and DuckDB blocks (total / free) at each stage.
Figures, never assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from ingest.decode.flatten import flatten_request
from store import SpanWriter, connect
from store.testing import DAY_NS, RetentionPass, cutoff_for, file_bytes

ROOT = Path(__file__).resolve().parent.parent

PER_REQUEST = 5_000


def request(traces: int, end_ns: int) -> ExportTraceServiceRequest:
    out = ExportTraceServiceRequest()
    resource_spans = out.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "bench-retention"
    scope_spans = resource_spans.scope_spans.add()
    for _ in range(traces):
        trace_id = os.urandom(16)
        for index in range(5):
            span = scope_spans.spans.add()
            span.trace_id, span.span_id = trace_id, os.urandom(8)
            span.name = f"span {index}"
            span.start_time_unix_nano, span.end_time_unix_nano = end_ns - 10**6, end_ns
    return out


def fill(path: Path, old: int, new: int) -> None:
    con = connect(path)
    try:
        writer = SpanWriter(con)
        for count, age in ((old, 100), (new, 1)):
            for _ in range(count // PER_REQUEST):
                writer.write(flatten_request(request(PER_REQUEST // 5,
                                                     time.time_ns() - age * DAY_NS)))
        con.execute("CHECKPOINT")
    finally:
        con.close()


def blocks(path: Path) -> str:
    con = connect(path)
    try:
        total, free = con.execute("SELECT total_blocks, free_blocks FROM pragma_database_size()"
                                  ).fetchone()
    finally:
        con.close()
    return f"{file_bytes(str(path)):>12,} bytes, {total:>4} blocks ({free} free)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--slice-traces", type=int, nargs="+", default=[1_000])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    folder = args.workdir or Path(tempfile.mkdtemp(prefix="bench-retention-"))
    folder.mkdir(parents=True, exist_ok=True)
    control = folder / "control.duckdb"
    fill(control, args.spans, args.spans)
    print(f"{args.spans:,} old + {args.spans:,} new spans (5 a trace); folder {folder}")
    print(f"control      after fill:           {blocks(control)}")
    fill(control, 0, args.spans)
    print(f"control      +{args.spans:,} new:      {blocks(control)}")
    for slice_traces in args.slice_traces:
        path = folder / f"retained-{slice_traces}.duckdb"
        fill(path, args.spans, args.spans)
        print(f"slice {slice_traces:>5}  after fill:           {blocks(path)}")
        con = connect(path)
        try:
            work = RetentionPass(cutoff_for(30), str(path), slice_traces)
            started = time.perf_counter()
            work.begin(con)
            find = time.perf_counter() - started
            slices = []
            while True:
                began = time.perf_counter()
                more = work.next_slice(con)
                if not more:
                    break
                slices.append(time.perf_counter() - began)
            began = time.perf_counter()
            result = work.finish(con)
            finish = time.perf_counter() - began
            total = time.perf_counter() - started
        finally:
            con.close()
        print(f"slice {slice_traces:>5}  retention: {result.traces:,} traces / {result.spans:,} "
              f"spans in {total:.2f} s ({result.spans / total:,.0f} spans/s): find expired "
              f"{find * 1000:.0f} ms, {len(slices)} slices median "
              f"{statistics.median(slices) * 1000:.0f} ms max {max(slices) * 1000:.0f} ms, "
              f"orphans + CHECKPOINT {finish * 1000:.0f} ms")
        print(f"slice {slice_traces:>5}  after retention:      {blocks(path)}")
        fill(path, 0, args.spans)
        print(f"slice {slice_traces:>5}  +{args.spans:,} new:      {blocks(path)}")


if __name__ == "__main__":
    main()
