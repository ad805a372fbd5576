"""Generate seeded, realistic agent traces as OTLP (JSON lines or protobuf).

    python -m sample_traces.generate --out PATH [--seed 7] [--runs N]
                                     [--format jsonl|pb-stream|pb] [--gzip]

Without --runs it writes the bundled sample (`sample_traces/sample.jsonl.gz` byte for byte).
Everything streams batch by batch, so millions of spans need no more memory than a few runs.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from .batching import SCHEDULE_DELAY_NS, Batch, batch_runs
from .latency import stream
from .otlp_encode import batch_to_json, batch_to_pb_bytes, batch_to_proto
from .policy import Policy, PolicySchedule, as_schedule
from .runs import RunSim
from .spans import Run
from .timeline import CUTOFF_NS, run_start_ns

DEFAULT_SEED = 7
DEFAULT_RUNS = 1_800
SAMPLE_PATH = Path(__file__).with_name("sample.jsonl.gz")
FORMATS = ("jsonl", "pb-stream", "pb")


def iter_runs(seed: int = DEFAULT_SEED, runs: int | None = None,
              policy: Policy | PolicySchedule | None = None) -> Iterator[Run]:
    """Simulated runs in start order. `policy` defaults to the baseline with W47 tightened."""
    n_runs = DEFAULT_RUNS if runs is None else runs
    schedule = as_schedule(policy)
    for index in range(n_runs):
        u = stream(seed, index, "start").random()
        run = RunSim(seed, index, run_start_ns(index, n_runs, u), schedule, n_runs).simulate()
        # The story ends before "today"; a run crossing midnight would be a generator bug.
        assert max(s.end_ns for s in run.spans) < CUTOFF_NS, "run ends after the timeline"
        yield run


def iter_batches(seed: int = DEFAULT_SEED, runs: int | None = None,
                 policy: Policy | PolicySchedule | None = None) -> Iterator[Batch]:
    return batch_runs(iter_runs(seed, runs, policy))


def iter_requests(seed: int = DEFAULT_SEED, runs: int | None = None,
                  policy: Policy | PolicySchedule | None = None,
                  ) -> Iterator[trace_service_pb2.ExportTraceServiceRequest]:
    """One ExportTraceServiceRequest per exporter batch, as protobuf messages."""
    for batch in iter_batches(seed, runs, policy):
        yield batch_to_proto(batch)


@dataclass
class Summary:
    runs: int = 0
    spans: int = 0
    requests: int = 0
    bytes: int = 0  # size of the file written (compressed when gzipped); 0 for a stream

    def line(self, path: Path, seconds: float) -> str:
        rate = self.spans / seconds if seconds > 0 else 0.0
        return (f"wrote {path}: {self.runs} runs, {self.spans} spans, {self.requests} requests, "
                f"{self.bytes} bytes in {seconds:.1f} s ({rate:,.0f} spans/s)")


class _CountingRuns:
    """Wraps the run stream to count runs without holding them."""

    def __init__(self, runs: Iterator[Run], summary: Summary) -> None:
        self.runs, self.summary = runs, summary

    def __iter__(self) -> Iterator[Run]:
        for run in self.runs:
            self.summary.runs += 1
            yield run


def _encoded(fmt: str, batches: Iterator[Batch], summary: Summary) -> Iterator[bytes]:
    for batch in batches:
        summary.requests += 1
        summary.spans += len(batch.spans)
        if fmt == "jsonl":
            yield batch_to_json(batch).encode() + b"\n"
            continue
        payload = batch_to_pb_bytes(batch)
        if fmt == "pb-stream":
            # The Collector file exporter's proto framing: 4-byte big-endian length, message.
            yield len(payload).to_bytes(4, "big") + payload
        else:
            # Concatenated serializations of one message type parse as one message whose
            # repeated resource_spans are the concatenation: a single request, streamed.
            yield payload


def write(out: Path | str | BinaryIO, fmt: str = "jsonl", seed: int = DEFAULT_SEED,
          runs: int | None = None, policy: Policy | PolicySchedule | None = None,
          compress: bool | None = None, compresslevel: int = 9,
          flush_seconds: float = SCHEDULE_DELAY_NS / 1e9) -> Summary:
    """Write traces in `fmt`; gzip when `compress`, or by default when the path ends in .gz."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    if compress is None:
        compress = isinstance(out, str | Path) and str(out).endswith(".gz")
    summary = Summary()
    run_stream = _CountingRuns(iter_runs(seed, runs, policy), summary)
    chunks = _encoded(fmt, batch_runs(run_stream, int(flush_seconds * 1e9)), summary)
    if isinstance(out, str | Path):
        with open(out, "wb") as raw:
            _write_chunks(raw, chunks, compress, compresslevel)
            summary.bytes = raw.tell()
    else:
        _write_chunks(out, chunks, compress, compresslevel)
    return summary


def _write_chunks(raw: BinaryIO, chunks: Iterator[bytes], compress: bool, level: int) -> None:
    if not compress:
        for chunk in chunks:
            raw.write(chunk)
        return
    # mtime=0 and no file name in the header: the same input gives the same bytes.
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level, mtime=0) as gz:
        buffered = io.BufferedWriter(gz, buffer_size=1 << 20)
        for chunk in chunks:
            buffered.write(chunk)
        buffered.flush()


def read_jsonl(path: Path | str) -> Iterator[dict]:
    """The requests of a (possibly gzipped) JSON-lines file, for tests and quick looks."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sample_traces.generate",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="file to write")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--runs", type=int, default=None,
                        help=f"number of runs (default: the bundled sample, {DEFAULT_RUNS})")
    parser.add_argument("--format", choices=FORMATS, default="jsonl")
    parser.add_argument("--gzip", action="store_true", help="gzip (implied by a .gz suffix)")
    parser.add_argument("--compresslevel", type=int, default=9, choices=range(1, 10),
                        metavar="1-9")
    parser.add_argument("--flush-seconds", type=float, default=SCHEDULE_DELAY_NS / 1e9,
                        help="exporter schedule delay (default 5 s, as the SDK); a long one "
                             "fills every request to 512 spans, as a Collector's batching does")
    args = parser.parse_args(argv)
    compress = True if args.gzip else None
    began = time.perf_counter()
    summary = write(args.out, args.format, args.seed, args.runs, compress=compress,
                    compresslevel=args.compresslevel, flush_seconds=args.flush_seconds)
    print(summary.line(args.out, time.perf_counter() - began), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
