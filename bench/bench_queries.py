"""Benchmark of the analytics: report latency, the on-call run lookup, derivation overhead.

    .venv/bin/python -m bench.bench_queries --runs 50000 --workdir /tmp/bench

Generates `runs<N>.pb` with the sample generator and loads it with `budgetscope ingest` (both
skipped when the files exist), then prints, on that database:
- each report (and the dashboard-only queries) warm: the median of --repeat timed calls after
  one untimed call;
- `load_run` (what `budgetscope run` reads) for --lookups random run ids, median and max, and
  the whole of `budgetscope run`'s work (load_run, then render_run at 80 columns: the story,
  the cost block, the waterfall);
- with --cost-budgets, a copy of the database on which every agent is given a dollar and a
  token budget by default at the 60th percentile of the runs' cost and tokens (about 40% of
  the runs exhaust each), so that the cost reports (docs/metrics.md §11.9) attribute real
  exhausted runs: each report timed again there, then `report cost`, `cost-attribution` and
  `weekly` against `report runs`, interleaved call by call, as wall and CPU time: the report
  alone, the report then its CSV bytes (the dashboard's download), and the CSV as the CLI
  writes it (the query's result in pieces), each with its ratio to `report runs`; then the
  same four as commands, `budgetscope report NAME --out FILE` a whole process each (start-up,
  imports, query, CSV), interleaved, the children's CPU from the operating system;
- the derivation's share of ingest: a further generated file loaded in 512-span batches into a
  copy of the database, each batch written without the hook and then derived in its own
  transaction, both timed; derivation as a percentage of the write alone and of the whole
  batch (decode + flatten + write).
Figures, never assertions: targets are in the issue (reports < 300 ms warm on ~1M spans,
`run` < 100 ms on 10M spans, derivation < 20% of ingest time per 512-span batch).

Against another revision, in one run: `python -m bench.ab --base REV -- bench.bench_queries
--skip-derivation` (bench/ab.py).
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from bench.support.timing import timed_ms
from ingest.files.loader import load_files
from queries.loader import load_queries
from queries.run_view import load_run
from store import FlatBatch, SpanWriter, connect
from store.testing import PendingDerivations, WriteResult, refresh_touched

ROOT = Path(__file__).resolve().parent.parent

PYTHON = sys.executable
# Bench-only SQL lives beside this script, loaded the same way as the product's queries.
BENCH_QUERIES = load_queries(Path(__file__).with_name("sql"),
                             frozenset({"bench_replicate_derived"}))


def report_calls(con) -> dict[str, Callable[[], object]]:  # type: ignore[no-untyped-def]
    from queries import reports
    from queries.filters import Filters

    week = Filters.parse("2026-11-16", "2026-11-23")
    calls: dict[str, Callable[[], object]] = {
        f"report {name}": (lambda f=fn: f(con, Filters())) for name, fn in reports.REPORTS.items()}
    calls["report weekly --agent support-agent"] = lambda: reports.weekly(
        con, Filters(agent="support-agent"))
    calls["report attribution (one week)"] = lambda: reports.attribution(con, week)
    calls["attribution_summary"] = lambda: reports.attribution_summary(con, Filters())
    calls["utilisation_histogram"] = lambda: reports.utilisation_histogram(con, Filters())
    calls["step_utilisation"] = lambda: reports.step_utilisation(con, Filters())
    calls["reconciliation_by_period"] = lambda: reports.reconciliation_by_period(con, Filters())
    if hasattr(reports, "token_attribution"):  # not on a revision before the cost reports
        calls["report cost-attribution --dimension tokens"] = \
            lambda: reports.token_attribution(con, Filters())
        calls["cost_attribution_summary"] = \
            lambda: reports.cost_attribution_summary(con, Filters())
    return calls


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
    from budgetscope.commands.run import render_run

    render_run(load_run(con, picks[0]), 80)
    times = []
    for run_id in picks:
        started = time.perf_counter()
        render_run(load_run(con, run_id), 80)
        times.append((time.perf_counter() - started) * 1e3)
    print(f"{'run command (load_run + render_run)':<40} median {statistics.median(times):7.1f} "
          f"ms   max {max(times):7.1f} ms   ({len(picks)} random runs)", flush=True)


def bench_cost_ratios(con: duckdb.DuckDBPyConnection, repeat: int) -> None:
    """The cost reports against `report runs`, interleaved (runs, cost, ..., runs, cost, ...)
    so that a neighbour's load falls on all alike; CPU time (this process's, DuckDB's threads
    included) moves less with the neighbours than wall time."""
    from queries import reports
    from queries.filters import Filters
    from queries.render import csv_chunks, to_csv_bytes

    named = {"report runs": reports.runs, "report cost": reports.cost,
             "report cost-attribution": reports.cost_attribution, "report weekly": reports.weekly}
    calls: dict[str, Callable[[], object]] = {}
    for name, report in named.items():
        command = name.removeprefix("report ")
        calls[name] = lambda r=report: r(con, Filters())
        calls[f"{name} as CSV"] = lambda r=report: to_csv_bytes(r(con, Filters()))
        # what `budgetscope report NAME` runs for a CSV: the query's result in pieces, each
        # made dollars and written as it comes (queries.reports.report_pieces)
        calls[f"{name} as the CLI"] = lambda n=command: b"".join(
            csv_chunks(reports.report_pieces(con, n, Filters())))
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()  # warm
    for _ in range(repeat):
        for name, call in calls.items():
            started, used = time.perf_counter(), time.process_time()
            call()
            wall[name].append((time.perf_counter() - started) * 1e3)
            cpu[name].append((time.process_time() - used) * 1e3)
    for name in calls:
        base = next((f"report runs{way}" for way in (" as CSV", " as the CLI")
                     if name.endswith(way)), "report runs")
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        w_ratio, c_ratio = w / statistics.median(wall[base]), c / statistics.median(cpu[base])
        print(f"{name + ', interleaved':<40} wall {w:7.1f} ms ({w_ratio:.2f}x runs)   "
              f"cpu {c:7.1f} ms ({c_ratio:.2f}x runs)", flush=True)


def bench_report_commands(db: Path, workdir: Path, repeat: int) -> None:
    """`budgetscope report NAME` as a user runs it, a whole process each (start-up, imports, the
    query, the CSV written to a file), interleaved (runs, cost, ..., runs, cost, ...); CPU is
    the operating system's account of each finished child (user + system), wall from outside."""
    names = ("runs", "cost", "cost-attribution", "weekly")
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    # the CLI's entry point run from this tree's root, which `-c` puts first on sys.path: under
    # bench/ab.py each side runs its own product (the installed script would run this checkout's)
    command = [PYTHON, "-c", "import sys; from budgetscope.cli import main; sys.exit(main())"]
    out = workdir / "report-command.csv"
    for round_ in range(repeat + 1):  # the first round warms the page cache, untimed
        for name in names:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run([*command, "--db", str(db), "report", name, "--out", str(out)],
                           check=True, cwd=ROOT)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if round_:
                wall[name].append((time.perf_counter() - started) * 1e3)
                cpu[name].append((after.ru_utime - before.ru_utime
                                  + after.ru_stime - before.ru_stime) * 1e3)
    for name in names:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"{'budgetscope report ' + name + ', whole process':<48} wall {w:7.1f} ms "
              f"({w / statistics.median(wall['runs']):.2f}x runs)   cpu {c:7.1f} ms "
              f"({c / statistics.median(cpu['runs']):.2f}x runs)", flush=True)


def with_cost_budgets(db: Path) -> Path:
    """A copy of `db` whose default dollar and token budgets sit at the 60th percentile of its
    runs' cost and tokens (made once, kept beside it), re-measured as `budgets set` does."""
    from store import Change, apply, catch_up

    copy = db.with_name(db.stem + "-cost.duckdb")
    if copy.exists():
        return copy
    shutil.copyfile(db, copy)
    con = connect(copy)
    try:
        usd, tokens = con.execute(
            "SELECT CAST(quantile_disc(cost_nano, 0.6) AS BIGINT), "
            "CAST(quantile_disc(tokens, 0.6) AS BIGINT) FROM runs WHERE tokens > 0").fetchone()
        started = time.monotonic()
        apply(con, Change("set_default", None, usd_nano=max(int(usd), 1),
                          tokens=max(int(tokens), 1)))
        catch_up(con)
        exhausted = con.execute("SELECT count(*) FILTER (WHERE usd_exhausted), "
                                "count(*) FILTER (WHERE tokens_exhausted), count(*) "
                                "FROM runs").fetchone()
    finally:
        con.close()
    print(f"declared by default --usd {usd / 1e9:g} --tokens {tokens} on a copy "
          f"({time.monotonic() - started:.1f} s to re-measure): {exhausted[0]:,} dollar- and "
          f"{exhausted[1]:,} token-exhausted runs of {exhausted[2]:,}", flush=True)
    return copy


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




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/budgetscope-bench"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lookups", type=int, default=50)
    parser.add_argument("--extra-runs", type=int, default=300)
    parser.add_argument("--batch-spans", type=int, default=512)
    parser.add_argument("--skip-derivation", action="store_true")
    parser.add_argument("--cost-budgets", action="store_true",
                        help="also time every report on a copy with default dollar and token "
                             "budgets (docs/metrics.md §11), so that runs exhaust them")
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
    bench_reports(con, args.repeat)
    bench_run_lookup(con, args.lookups)
    con.close()
    if args.cost_budgets:
        con = connect(with_cost_budgets(db), read_only=True)
        print("with dollar and token budgets:", flush=True)
        bench_reports(con, args.repeat)
        bench_run_lookup(con, args.lookups)
        bench_cost_ratios(con, max(args.repeat, 9))
        con.close()
        bench_report_commands(with_cost_budgets(db), args.workdir, max(args.repeat, 9))
    if args.replicate:
        bench_run_lookup_replicated(db, args.replicate, args.lookups)
    if not args.skip_derivation:
        extra = args.workdir / f"extra{args.extra_runs}.pb"
        generate(extra, args.extra_runs, seed=99)
        bench_derivation(db, extra, args.batch_spans)


if __name__ == "__main__":
    main()
