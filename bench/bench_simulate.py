"""Benchmark of the timeout-policy simulator: ms per simulation at N runs, and the
What-if page's response to a slider.

    .venv/bin/python -m bench.bench_simulate --runs 50000 --workdir bench/out
    .venv/bin/python -m bench.bench_simulate --db path/to/existing.duckdb

Without --db it generates `simulate-runs<N>.pb` with the sample generator and loads it with
`budgetscope ingest` (both skipped when the files exist; 50k runs ≈ 1.4M spans, ~3 min to
generate and a few more to ingest on 2 cores). Then, on that database, the median of --repeat
timed calls after one untimed call:
- read: the two SQL reads (simulation_runs, simulation_steps) into DataFrames;
- prepare: stages, censoring, fits and draws (once per data set and filter; cached by the page);
- replay: one policy on prepared data (what a slider move costs), for several policies;
- simulate: read + prepare + replay, what `budgetscope simulate` does per call;
- the page: AppTest reruns of dashboard/app_pages/simulate.py after moving a cap slider, a
  proxy for the browser's response (it runs the script and builds every element, but draws
  nothing; the browser test prints its own figure, which adds rendering).
Figures only, never assertions: the issue's targets are one simulation over 50k runs < 2 s and
the page answering a slider < 3 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from bench.support.timing import timed_ms
from queries.filters import Filters
from simulation.data import simulate, simulation_runs, simulation_steps
from simulation.policy import SimulationPolicy
from simulation.replay import prepare, replay
from store import connect

ROOT = Path(__file__).resolve().parent.parent

PYTHON = sys.executable
POLICIES = {
    "as recorded": SimulationPolicy(),
    "fetch_report=9s": SimulationPolicy.parse(["fetch_report=9s"]),
    "all tool caps halved-ish + 40s deadline": SimulationPolicy.parse(
        ["fetch_report=6s", "search_api=5s", "vector_lookup=1s", "kb_search=2s",
         "create_ticket=4s"], "40s"),
    "fetch_report=9s, 18s, min-start 1s, no retries": SimulationPolicy.parse(
        ["fetch_report=9s"], "18s", "1s", retries=False),
    "looser: fetch_report=none, 120s": SimulationPolicy.parse(["fetch_report=none"], "120s"),
}


def build(workdir: Path, runs: int, seed: int) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    traces = workdir / f"simulate-runs{runs}.pb"
    db = workdir / f"simulate-runs{runs}.duckdb"
    if not traces.exists() and not db.exists():
        print(f"generating {traces} ({runs} runs)…", flush=True)
        subprocess.run([PYTHON, "-m", "sample_traces.generate", "--runs", str(runs), "--seed",
                        str(seed), "--format", "pb-stream", "--out", str(traces)],
                       cwd=ROOT, check=True)
    if not db.exists():
        started = time.monotonic()
        subprocess.run([PYTHON, "-c", "from budgetscope.cli import main; main()", "--db",
                        str(db), "ingest", "--no-progress", str(traces)], cwd=ROOT, check=True)
        print(f"ingest: {time.monotonic() - started:.1f} s", flush=True)
    return db


def line(name: str, median: float, worst: float) -> None:
    print(f"{name:<58} median {median:8.1f} ms   max {worst:8.1f} ms", flush=True)


def calibrate(repeat: int) -> None:
    """A fixed numpy workload, printed so that a figure taken on a busy machine can be read:
    on an idle core one multiply of 840k doubles takes about 1 ms."""
    import numpy as np

    values = np.random.default_rng(0).random(840_000)
    line("reference: 840k-double numpy multiply (machine load)",
         *timed_ms(lambda: values * 1.5, max(repeat, 20)))


def bench_simulation(db: Path, repeat: int) -> None:
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs, steps = simulation_runs(con), simulation_steps(con)
        print(f"database {db}: {len(runs):,} runs, {len(steps):,} top-level steps", flush=True)
        line("read (simulation_runs + simulation_steps)",
             *timed_ms(lambda: (simulation_runs(con), simulation_steps(con)), repeat))
        line("prepare (stages, censored fits, draws)",
             *timed_ms(lambda: prepare(runs, steps), repeat))
        prepared = prepare(runs, steps)
        for name, policy in POLICIES.items():
            line(f"replay: {name}", *timed_ms(lambda p=policy: replay(prepared, p), repeat))
        policy = POLICIES["fetch_report=9s, 18s, min-start 1s, no retries"]
        line("simulate end to end (read + prepare + replay)",
             *timed_ms(lambda: simulate(con, policy, Filters()), repeat))
    finally:
        con.close()


def bench_page(db: Path, repeat: int) -> None:
    from streamlit.testing.v1 import AppTest

    os.environ["BUDGETSCOPE_DB"] = str(db)
    at = AppTest.from_file(str(ROOT / "dashboard" / "streamlit_app.py"), default_timeout=600)
    at.query_params["range"] = "all"
    at.switch_page("app_pages/simulate.py")
    started = time.perf_counter()
    at.run()
    first = (time.perf_counter() - started) * 1e3
    if at.exception:
        print(f"page failed: {[e.message for e in at.exception]}", flush=True)
        return
    print(f"{'page first run (reads, prepares, replays, draws)':<58} {first:8.1f} ms",
          flush=True)
    slider = at.slider(key="sim_cap:tool:fetch_report")
    values = [3.0, 5.0, 9.0, 12.0, 2.0, 7.0][:max(repeat, 1)]
    times = []
    for value in values:
        slider.set_value(value)
        started = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - started) * 1e3)
        slider = at.slider(key="sim_cap:tool:fetch_report")
    line("page rerun after a cap slider moves (AppTest proxy)", statistics.median(times),
         max(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--db", type=Path, help="an existing database instead of generating")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-page", action="store_true", help="skip the AppTest figure")
    args = parser.parse_args()
    db = args.db or build(args.workdir, args.runs, args.seed)
    # Bring a database made by an older build up to the current schema (the page's sidebar
    # reads tables newer builds added); read-only opens never migrate.
    connect(db).close()
    calibrate(args.repeat)
    bench_simulation(db, args.repeat)
    if not args.no_page:
        bench_page(db, args.repeat)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mb:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
