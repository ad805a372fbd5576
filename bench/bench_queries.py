"""Benchmark of the analytics: report latency, the on-call run lookup, derivation overhead.

    .venv/bin/python bench/bench_queries.py --runs 50000 --workdir /tmp/bench

Generates `runs<N>.pb` with the sample generator and loads it with `budgetscope ingest` (both
skipped when the files exist), then prints, on that database:
- each report (and the dashboard-only queries) warm: the median of --repeat timed calls after
  one untimed call;
- `load_run` (what `budgetscope run` reads) for --lookups random run ids, median and max;
- the derivation's share of ingest: a further generated file loaded in 512-span batches into a
  copy of the database, each batch written without the hook and then derived in its own
  transaction, both timed; derivation as a percentage of the write alone and of the whole
  batch (decode + flatten + write).
Figures, never assertions: targets are in the issue (reports < 300 ms warm on ~1M spans,
`run` < 100 ms on 10M spans, derivation < 20% of ingest time per 512-span batch).

With `--baseline-tree DIR` (another checkout, e.g. `git worktree add /tmp/base main`), the
report and run-view timings are instead taken by bench/report_timings.py in child processes
that import the product from DIR and from this tree in turn (--rounds times, alternating, on
the same database file), printed side by side with their ratio, so a change is measured
against its baseline in one run under the same load.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
from report_timings import report_calls, timed_ms  # noqa: E402

from ingest.files.loader import load_files  # noqa: E402
from queries.loader import load_queries  # noqa: E402
from queries.run_view import load_run  # noqa: E402
from store import (  # noqa: E402  # noqa: E402
    FlatBatch,
    PendingDerivations,  # noqa: E402
    SpanWriter,
    WriteResult,
    connect,
    refresh_touched,  # noqa: E402
)

PYTHON = sys.executable
# Bench-only SQL lives beside this script, loaded the same way as the product's queries.
BENCH_QUERIES = load_queries(Path(__file__).with_name("sql"),
                             frozenset({"bench_replicate_derived"}))


def execute(con: duckdb.DuckDBPyConnection, name: str, parameters: dict) -> None:
    query = BENCH_QUERIES[name]
    for statement in query.text.split(";\n"):
        code = "\n".join(line.split("--", 1)[0] for line in statement.splitlines()).strip()
        if code:
            used = {k: v for k, v in parameters.items() if f"${k}" in code}
            con.execute(code, used or None)


def generate(path: Path, runs: int, seed: int) -> None:
    if path.exists():
        return
    print(f"generating {path} ({runs} runs)…", flush=True)
    subprocess.run([PYTHON, "-m", "sample_traces.generate", "--runs", str(runs), "--seed",
                    str(seed), "--format", "pb-stream", "--out", str(path)],
                   cwd=ROOT, check=True)


def ingest(db: Path, trace_file: Path) -> None:
    if db.exists():
        return
    started = time.monotonic()
    subprocess.run([PYTHON, "-c", "from budgetscope.cli import main; main()", "--db", str(db),
                    "ingest", "--no-progress", str(trace_file)], cwd=ROOT, check=True)
    print(f"ingest with derivation: {time.monotonic() - started:.1f} s", flush=True)


def bench_reports(con: duckdb.DuckDBPyConnection, repeat: int) -> None:
    for name, call in report_calls(con).items():
        median, worst = timed_ms(call, repeat)
        print(f"{name:<40} median {median:7.1f} ms   max {worst:7.1f} ms", flush=True)


def bench_run_lookup(con: duckdb.DuckDBPyConnection, lookups: int) -> None:
    ids = [row[0] for row in con.execute("SELECT run_id FROM runs").fetchall()]
    picks = random.Random(1).sample(ids, min(lookups, len(ids)))
    load_run(con, picks[0])
    times = []
    for run_id in picks:
        started = time.perf_counter()
        load_run(con, run_id)
        times.append((time.perf_counter() - started) * 1e3)
    print(f"{'run view (load_run)':<40} median {statistics.median(times):7.1f} ms   "
          f"max {max(times):7.1f} ms   ({len(picks)} random runs)", flush=True)


class SplitTimingWriter:
    """Writes each batch without the hook, then derives its traces in a second transaction,
    timing both, so the derivation's cost is measured on the same batches."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.plain = SpanWriter(con)
        self.write_s = 0.0
        self.derive_s = 0.0
        self.batches = 0

    def write(self, batch: FlatBatch) -> WriteResult:
        started = time.perf_counter()
        result = self.plain.write(batch)
        written = time.perf_counter()
        if batch.span_count:
            # what serve's writer does after each acknowledged write: derive the marked traces
            PendingDerivations(refresh_touched).run(self.con)
            self.batches += 1
        self.write_s += written - started
        self.derive_s += time.perf_counter() - written
        return result


def bench_derivation(db: Path, extra: Path, batch_spans: int) -> None:
    copy = db.with_name(db.stem + "-derive-bench.duckdb")
    shutil.copyfile(db, copy)
    try:
        con = connect(copy)
        writer = SplitTimingWriter(con)
        started = time.perf_counter()
        summary = load_files(con, [extra], chunk_spans=batch_spans, writer=writer,  # type: ignore[arg-type]
                             progress=False)
        total = time.perf_counter() - started
        con.close()
    finally:
        copy.unlink(missing_ok=True)
        Path(f"{copy}.wal").unlink(missing_ok=True)
    without = total - writer.derive_s
    print(f"derivation, {writer.batches} batches of {batch_spans} spans "
          f"({summary.spans_loaded:,} spans): write {writer.write_s * 1e3 / writer.batches:.1f} "
          f"ms/batch, derive {writer.derive_s * 1e3 / writer.batches:.1f} ms/batch, ingest "
          f"without derivation {without * 1e3 / writer.batches:.1f} ms/batch → derivation adds "
          f"{100 * writer.derive_s / without:.0f}% to ingest time "
          f"({100 * writer.derive_s / writer.write_s:.0f}% of the write alone)", flush=True)


def bench_run_lookup_replicated(db: Path, copies: int, lookups: int) -> None:
    """The run view reads only runs, steps and reconcile_links (by index), so its cost at 10M
    spans is measured on a copy whose derived tables are replicated `copies` times under new
    trace ids (the spans table is left as is: the run view never reads it)."""
    copy = db.with_name(db.stem + "-replicated.duckdb")
    shutil.copyfile(db, copy)
    try:
        con = connect(copy)
        con.execute("SET enable_progress_bar = false")
        execute(con, "bench_replicate_derived", {"copies": copies})
        steps = con.execute("SELECT count(*) FROM steps").fetchone()[0]
        print(f"replicated derived tables ×{copies + 1}: {steps:,} steps "
              f"(the step count of ~{steps * 1.51 / 1e6:.0f}M spans at this sample's ratio)",
              flush=True)
        bench_run_lookup(con, lookups)
        con.close()
    finally:
        copy.unlink(missing_ok=True)
        Path(f"{copy}.wal").unlink(missing_ok=True)


def compare_with_baseline(db: Path, baseline: Path, args: argparse.Namespace) -> None:
    trees = {"baseline": baseline.resolve(), "this tree": ROOT}
    script = str(Path(__file__).with_name("report_timings.py"))
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    for _ in range(args.rounds):
        for label, tree in trees.items():  # alternating, so both see the same load
            out = subprocess.run([PYTHON, script, "--tree", str(tree), "--db", str(db),
                                  "--repeat", str(args.repeat), "--lookups", str(args.lookups)],
                                 cwd=tree, check=True, capture_output=True, text=True).stdout
            runs[label].append(json.loads(out.strip().splitlines()[-1]))
    print(f"baseline {trees['baseline']} against this tree {ROOT}: median over {args.rounds} "
          f"alternating rounds of each round's median of {args.repeat} warm calls")
    print(f"{'':<40}{'baseline ms':>12}{'this tree ms':>14}{'ratio':>8}")
    ratios = []
    for name in runs["this tree"][0]:
        base = statistics.median(r[name] for r in runs["baseline"])
        mine = statistics.median(r[name] for r in runs["this tree"])
        ratios.append(mine / base)
        print(f"{name:<40}{base:>12.1f}{mine:>14.1f}{mine / base:>8.2f}", flush=True)
    geo = statistics.geometric_mean(ratios)
    print(f"{'geometric mean of the ratios':<66}{geo:>8.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-tree", type=Path,
                        help="time the reports and the run view with this checkout's product "
                             "and with this tree's, in one run, and print the ratios")
    parser.add_argument("--rounds", type=int, default=3,
                        help="with --baseline-tree: alternating child runs per tree")
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/budgetscope-bench"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lookups", type=int, default=50)
    parser.add_argument("--extra-runs", type=int, default=300)
    parser.add_argument("--batch-spans", type=int, default=512)
    parser.add_argument("--skip-derivation", action="store_true")
    parser.add_argument("--replicate", type=int, default=0,
                        help="also time the run view with the derived tables copied N more "
                             "times (6 ≈ 10M spans from 50k runs)")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    trace_file = args.workdir / f"runs{args.runs}.pb"
    db = args.workdir / f"b{args.runs}.duckdb"
    generate(trace_file, args.runs, seed=1)
    ingest(db, trace_file)
    con = connect(db)
    con.execute("SET enable_progress_bar = false")
    spans, runs = (con.execute("SELECT count(*) FROM spans").fetchone()[0],
                   con.execute("SELECT count(*) FROM runs").fetchone()[0])
    print(f"database {db}: {spans:,} spans, {runs:,} runs", flush=True)
    if args.baseline_tree:
        con.close()
        compare_with_baseline(db, args.baseline_tree, args)
        return
    bench_reports(con, args.repeat)
    bench_run_lookup(con, args.lookups)
    con.close()
    if args.replicate:
        bench_run_lookup_replicated(db, args.replicate, args.lookups)
    if not args.skip_derivation:
        extra = args.workdir / f"extra{args.extra_runs}.pb"
        generate(extra, args.extra_runs, seed=99)
        bench_derivation(db, extra, args.batch_spans)


if __name__ == "__main__":
    main()
