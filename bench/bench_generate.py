"""Sample generator speed: spans per second of CPU, against a baseline generator in the same run.

    .venv/bin/python bench/bench_generate.py --baseline /tmp/gen_base [--runs 3000] [--repeat 3]

`--baseline` is another checkout of this repository (e.g. `git worktree add /tmp/gen_base main`
before a change to the generator). Each repeat runs both generators, alternating, as
subprocesses writing the benchmarks' format (`--format pb-stream`, a 5 s flush) to a temporary
file; the figure is spans per CPU second of the child (user + system), which a loaded machine
disturbs less than wall time, with the wall time beside it. Both run with this checkout's
interpreter and packages, so only the generator's code differs.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _spans(path: Path) -> int:
    """Count spans in a pb-stream file without budgetscope: each frame is one request."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    count = 0
    data = path.read_bytes()
    at = 0
    while at < len(data):
        size = int.from_bytes(data[at:at + 4], "big")
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(data[at + 4:at + 4 + size])
        count += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        at += 4 + size
    return count


def run_once(checkout: Path, runs: int, out: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one generation in `checkout`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sample_traces.generate", "--runs", str(runs),
                    "--format", "pb-stream", "--out", str(out)],
                   cwd=checkout, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(checkout)})
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    figures: dict[str, list[tuple[float, float]]] = {"baseline": [], "this": []}
    spans: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for label, checkout in (("baseline", args.baseline), ("this", ROOT)):
                out = Path(tmp) / f"{label}.pb"
                figures[label].append(run_once(checkout, args.runs, out))
                spans[label] = _spans(out)
    print(f"sample generator, {args.runs} runs, pb-stream, median of {args.repeat}, "
          f"load average {load:.1f} at the start")
    rates = {}
    for label in ("baseline", "this"):
        cpu = statistics.median(c for c, _ in figures[label])
        wall = statistics.median(w for _, w in figures[label])
        rates[label] = spans[label] / cpu
        print(f"  {label:8s} {spans[label]:>9,} spans  {cpu:6.2f} s CPU  {wall:6.2f} s wall  "
              f"{rates[label]:>9,.0f} spans/CPU-s")
    print(f"  ratio this/baseline (spans per CPU second): {rates['this'] / rates['baseline']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
