"""Benchmark of the ClickHouse backend (#8) beside the DuckDB backend, on the same spans.

    .venv/bin/python -m bench.bench_clickhouse --spans 10000000 --workdir /tmp/bench_ch

How the data is made: the bundled sample (52,198 spans, 1,800 runs) is loaded into both
engines (DuckDB through `budgetscope ingest`'s loader, ClickHouse through
bench/support/clickhouse_load/traces.py, as the Collector's exporter writes otel_traces), then
replicated inside each engine with new ids until --spans is reached: copy k of a span gets the ids
md5(id || '/' || k) (bench/sql_clickhouse/), the same function in both engines, so both hold
the very same spans (same times, so every copy lands in the sample's weeks). DuckDB then
derives (store.testing.rebuild_all) and ClickHouse builds its derived tables
(derive_build.sql); both times are printed.

Then, per report (the six `budgetscope report` ones, plus the run view), warm: one untimed
call, then the median of --repeat calls, DuckDB and ClickHouse interleaved (A, B, A, B…), and
whether the two outputs are the same CSV bytes. Figures only; the target in the issue is every
report under 2 s on ClickHouse at 10M spans. Also printed: the derivation time, which is what
every report would pay on top if the derived data were views computed at query time instead of
tables built by a derive step.

Against another revision, in one run: `python -m bench.ab --base REV -- bench.bench_clickhouse
--workdir DIR` (bench/ab.py). --rebuilds N times N forced rebuilds of the derived tables, what
new spans cost (on the sample alone: `--spans 52169`); --remeasures N times N declaration
changes' re-measures (derive_remeasure.sql, what a `budgets` or `prices` change costs), each
beside a forced rebuild in the same run, and prints their ratio.
"""

from __future__ import annotations

import argparse
import math
import re
import resource
import shutil
import statistics
import time
from pathlib import Path

from bench.support.clickhouse_load.traces import load_files as clickhouse_load
from budgetscope.config import SAMPLE_TRACES
from ingest.files.loader import load_files as duckdb_load
from queries import reports
from queries.filters import Filters
from queries.loader import load_queries
from queries.render import to_csv_bytes
from queries.run_view import load_run
from store import Change, clickhouse, clickhouse_declared
from store import connect as duckdb_connect
from store.testing import rebuild_all

ROOT = Path(__file__).resolve().parent.parent


def count_sample_spans() -> int:
    """Spans in the bundled sample (OTLP JSON, one request a line); regenerating the sample
    changes it, so it is counted rather than written down."""
    import gzip
    import json as json_module

    with gzip.open(SAMPLE_TRACES, "rt", encoding="utf-8") as lines:
        return sum(len(scope.get("spans", ())) for line in lines if line.strip()
                   for resource in json_module.loads(line).get("resourceSpans", ())
                   for scope in resource.get("scopeSpans", ()))


SAMPLE_SPANS = count_sample_spans()
BENCH_SQL = load_queries(Path(__file__).with_name("sql_clickhouse"),
                         frozenset({"bench_replicate_otel_traces", "bench_replicate_spans"}),
                         re.compile(r"\{(?P<name>[a-z_][a-z0-9_]*):"))
COPIES_PER_STATEMENT = 20


def seconds(started: float) -> str:
    return f"{time.perf_counter() - started:.1f} s"


def build_duckdb(path: Path, copies: int) -> None:
    started = time.perf_counter()
    con = duckdb_connect(path)
    summary = duckdb_load(con, [SAMPLE_TRACES], derive=True)
    assert not summary.rejections
    con.execute("CREATE TEMP TABLE bench_sample AS SELECT * FROM spans")
    for first in range(1, copies, COPIES_PER_STATEMENT):
        con.execute(BENCH_SQL["bench_replicate_spans"].text,
                    {"first_copy": first,
                     "last_copy": min(copies, first + COPIES_PER_STATEMENT)})
    print(f"duckdb: {copies} copies loaded in {seconds(started)}", flush=True)
    started = time.perf_counter()
    rebuild_all(con)
    print(f"duckdb: derivation (rebuild_all) {seconds(started)}", flush=True)
    con.close()


def build_clickhouse(url: str, copies: int) -> float:
    started = time.perf_counter()
    con = clickhouse.connect(url)
    assert clickhouse_load(con, [SAMPLE_TRACES]) == SAMPLE_SPANS
    con.command("CREATE TABLE bench_sample ENGINE = MergeTree ORDER BY tuple() "
                "AS SELECT * FROM otel_traces")
    text = BENCH_SQL["bench_replicate_otel_traces"].text
    for first in range(1, copies, COPIES_PER_STATEMENT):
        con.command(text, {"first_copy": first,
                           "last_copy": min(copies, first + COPIES_PER_STATEMENT)})
    con.command("DROP TABLE bench_sample")
    print(f"clickhouse: {copies} copies loaded in {seconds(started)}", flush=True)
    started = time.perf_counter()
    clickhouse.ensure_derived(con, force=True)
    derive = time.perf_counter() - started
    print(f"clickhouse: derivation (derive_build.sql) {derive:.1f} s", flush=True)
    return derive


def cpu_seconds() -> float:
    """User and system CPU time of this process so far (every thread's)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(call, repeat: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    result = call()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def rebuild_times(ch: clickhouse.ClickHouseConnection, rebuilds: int) -> None:
    """Forced rebuilds, one after another, after one untimed (the scratch tables' first)."""
    clickhouse.ensure_derived(ch, force=True)
    walls, cpus = [], []
    for _ in range(rebuilds):
        started, cpu = time.perf_counter(), cpu_seconds()
        clickhouse.ensure_derived(ch, force=True)
        walls.append(time.perf_counter() - started)
        cpus.append(cpu_seconds() - cpu)
    print(f"clickhouse: a forced rebuild, median of {rebuilds}: "
          f"{statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f}), "
          f"CPU {statistics.median(cpus):.2f} s", flush=True)


def remeasure_times(ch: clickhouse.ClickHouseConnection, remeasures: int) -> None:
    """A declared default budget set and removed in turn, each change's re-measure
    (derive_remeasure.sql, what `budgets` and `prices` cost now) timed beside a forced
    rebuild (what they cost before), interleaved; the backend left undeclared and current."""
    clickhouse.ensure_derived(ch, force=True)
    times: dict[str, list[float]] = {"rebuild": [], "remeasure": []}
    cpus: dict[str, list[float]] = {"rebuild": [], "remeasure": []}
    for number in range(remeasures):
        change = Change("set_default", None, 30_000) if number % 2 == 0 else \
            Change("unset_default")
        clickhouse_declared.apply(ch, change)
        if clickhouse.derivation_due(ch) != "remeasure":
            raise RuntimeError("a declaration change did not ask for a re-measure")
        for kind, force in (("remeasure", False), ("rebuild", True)):
            started, cpu = time.perf_counter(), cpu_seconds()
            clickhouse.ensure_derived(ch, force=force)
            times[kind].append(time.perf_counter() - started)
            cpus[kind].append(cpu_seconds() - cpu)
    if remeasures % 2:
        clickhouse_declared.apply(ch, Change("unset_default"))
        clickhouse.ensure_derived(ch)
    for kind in ("rebuild", "remeasure"):
        walls = times[kind]
        print(f"clickhouse: a {kind} after a declaration change, median of {remeasures}: "
              f"{statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f}), "
              f"CPU {statistics.median(cpus[kind]):.2f} s", flush=True)
    print(f"clickhouse: re-measure / rebuild: wall "
          f"{statistics.median(times['remeasure']) / statistics.median(times['rebuild']):.2f}x,"
          f" CPU {statistics.median(cpus['remeasure']) / statistics.median(cpus['rebuild']):.2f}x",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=10_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench_clickhouse"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fresh", action="store_true",
                        help="rebuild both databases even if --workdir has them")
    parser.add_argument("--rederive", action="store_true",
                        help="rebuild ClickHouse's derived tables before timing (after a change "
                             "to derive_build.sql), printing how long it took")
    parser.add_argument("--rebuilds", type=int, default=0,
                        help="then time this many forced rebuilds of ClickHouse's derived tables "
                             "(what new spans cost), printing the median, range and CPU time "
                             "of one")
    parser.add_argument("--remeasures", type=int, default=0,
                        help="then time this many declaration changes' re-measures of "
                             "ClickHouse's derived tables, each beside a forced rebuild "
                             "(interleaved), printing both medians and their ratio")
    args = parser.parse_args()
    copies = max(1, math.ceil(args.spans / SAMPLE_SPANS))
    duck_path = args.workdir / "bench.duckdb"
    url = f"chdb://{args.workdir / 'chdb'}"
    if args.fresh:
        shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    # Each database is built once per --workdir (and kept), so a run can be repeated cheaply.
    if not (args.workdir / "chdb.built").exists():
        shutil.rmtree(args.workdir / "chdb", ignore_errors=True)
        build_clickhouse(url, copies)
        (args.workdir / "chdb.built").touch()
    if not (args.workdir / "duckdb.built").exists():
        duck_path.unlink(missing_ok=True)
        build_duckdb(duck_path, copies)
        (args.workdir / "duckdb.built").touch()
    ch = clickhouse.connect(url)
    started, cpu = time.perf_counter(), cpu_seconds()
    if clickhouse.ensure_derived(ch, force=args.rederive):
        # chdb runs in this process: its threads' CPU time is this process's, and moves less
        # with the neighbours' load than the wall time does
        print(f"clickhouse: derivation (derive_build.sql) {seconds(started)}, "
              f"CPU {cpu_seconds() - cpu:.1f} s", flush=True)
    if args.rebuilds:
        rebuild_times(ch, args.rebuilds)
    if args.remeasures:
        remeasure_times(ch, args.remeasures)
    spans = int(ch.scalar("SELECT count() FROM otel_traces"))
    runs = int(ch.scalar("SELECT count() FROM budgetscope_runs"))
    print(f"\n{spans:,} spans, {runs:,} runs ({copies} copies of the sample); "
          f"median of {args.repeat} warm calls, DuckDB and ClickHouse interleaved")
    duck = duckdb_connect(duck_path, read_only=True)
    filters = Filters()
    print(f"{'report':<16}{'duckdb ms':>11}{'clickhouse ms':>15}  same output")
    for name, report in reports.REPORTS.items():
        a_times, b_times = [], []
        a = b = None
        for _ in range(args.repeat):  # interleaved
            t, a = timed(lambda report=report: report(duck, filters), 1)
            a_times.append(t)
            t, b = timed(lambda report=report: report(ch, filters), 1)
            b_times.append(t)
        same = to_csv_bytes(a) == to_csv_bytes(b)  # type: ignore[arg-type]
        print(f"{name:<16}{statistics.median(a_times) * 1e3:>11.0f}"
              f"{statistics.median(b_times) * 1e3:>15.0f}  {'yes' if same else 'NO'}",
              flush=True)
    run_id = str(reports.runs(ch, filters)["run_id"].iloc[runs // 2])
    a_t, _ = timed(lambda: load_run(duck, run_id), args.repeat)
    b_t, _ = timed(lambda: load_run(ch, run_id), args.repeat)
    print(f"{'run view':<16}{a_t * 1e3:>11.0f}{b_t * 1e3:>15.0f}")
    print("\nthe derivation time above is what each report would add if runs and steps were "
          "views computed at query time")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process (DuckDB and chdb both in it): {peak:,.0f} MB")
    duck.close()
    clickhouse.close_all()


if __name__ == "__main__":
    main()
