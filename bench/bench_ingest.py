"""File ingest throughput and peak memory, beside bare decode-and-flatten speed of the same data.

    .venv/bin/python -m bench.bench_ingest [--spans 100000 1000000]

For each size: generate binary OTLP (the Collector's length-prefixed protobuf stream) with the
sample generator, then in separate processes (so each peak RSS is its own):
  decode   — read the file, parse every message, flatten every span; store nothing
  ingest   — `budgetscope ingest` into a fresh DuckDB file (decode, flatten, commit, dedupe)
Prints spans/s and peak RSS for both, and ingest speed as a fraction of decode speed.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SPANS_PER_RUN = 29  # roughly what the generator makes; the exact count is measured


def generate(spans: int) -> Path:
    path = OUT / f"traces-{spans}.pb-stream"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "sample_traces.generate", "--runs",
                        str(spans // SPANS_PER_RUN), "--format", "pb-stream",
                        # 512-span requests, as a Collector's batch processor writes them
                        "--flush-seconds", "86400", "--out",
                        str(path)], check=True, cwd=ROOT)
    return path


def _decode_only(path: Path) -> dict[str, float]:
    from ingest.decode.flatten import DEFAULT_MAX_FUTURE_NS
    from ingest.files.loader import CHUNK_SPANS
    from ingest.files.sources import read_pieces
    from store import FlatBatch

    started = time.perf_counter()
    spans = 0
    batch = FlatBatch()
    for piece in read_pieces(path):
        piece.flatten(max_future_ns=DEFAULT_MAX_FUTURE_NS, into=batch)
        if batch.span_count >= CHUNK_SPANS:  # same batching as ingest, so memory compares
            spans += batch.span_count
            batch = FlatBatch()
    spans += batch.span_count
    seconds = time.perf_counter() - started
    return {"spans": spans, "seconds": seconds}


def _child(task: str, path: Path, db: Path) -> None:
    if task == "decode":
        result = _decode_only(path)
    else:
        from budgetscope.cli import cli

        started = time.perf_counter()
        try:
            cli(["--db", str(db), "ingest", "--no-progress", str(path)], standalone_mode=False)
        finally:
            seconds = time.perf_counter() - started
        import duckdb

        con = duckdb.connect(str(db), read_only=True)
        result = {"spans": con.execute("SELECT count(*) FROM spans").fetchone()[0],
                  "seconds": seconds}
        con.close()
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


def _measure(task: str, path: Path, db: Path) -> dict[str, float]:
    output = subprocess.run([sys.executable, "-m", "bench.bench_ingest", "--child", task,
                             str(path), str(db)],
                            check=True, capture_output=True, text=True, cwd=ROOT).stdout
    line = next(row for row in output.splitlines() if row.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        task, path, db = args.child
        _child(task, Path(path), Path(db))
        return
    print(f"{'spans':>10} {'file MB':>8} {'decode spans/s':>15} {'decode RSS MB':>14} "
          f"{'ingest spans/s':>15} {'ingest RSS MB':>14} {'ingest/decode':>14}")
    for size in args.spans:
        path = generate(size)
        db = OUT / f"bench-{size}.duckdb"
        db.unlink(missing_ok=True)
        Path(f"{db}.wal").unlink(missing_ok=True)
        decode = _measure("decode", path, db)
        ingest = _measure("ingest", path, db)
        decode_rate = decode["spans"] / decode["seconds"]
        ingest_rate = ingest["spans"] / ingest["seconds"]
        print(f"{int(ingest['spans']):>10,} {path.stat().st_size / 1e6:>8.1f} "
              f"{decode_rate:>15,.0f} {decode['peak_rss_mb']:>14.0f} {ingest_rate:>15,.0f} "
              f"{ingest['peak_rss_mb']:>14.0f} {ingest_rate / decode_rate:>14.0%}", flush=True)


if __name__ == "__main__":
    main()
