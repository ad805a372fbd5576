"""What a /metrics scrape (after its cache expires) and `budgetscope check` cost: the
headline query (queries/sql/headline.sql) on a database, for a few window lengths.

    .venv/bin/python -m bench.bench_signals --db bench/out/bench-1000000.duckdb

Copies the database (so the file it reads is never changed), then prints for each window the
median and max of --repeat timed calls after one untimed call, and what the window held.
Figures, never assertions.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from queries.filters import Filters
from queries.signals import recent_signals
from store import connect

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    copy = Path(tempfile.mkdtemp(prefix="bench-signals-")) / "copy.duckdb"
    shutil.copyfile(args.db, copy)
    con = connect(copy)
    try:
        spans, runs, newest = con.execute(
            "SELECT (SELECT count(*) FROM spans), (SELECT count(*) FROM runs), "
            "(SELECT max(start_ns) FROM runs)").fetchone()
        until = dt.datetime.fromtimestamp((newest or time.time_ns()) / 1e9 + 1, dt.UTC)
        print(f"{args.db}: {spans:,} spans, {runs:,} runs; windows end at the newest run start "
              f"({until:%Y-%m-%d %H:%M}Z)")
        for label, length in (("1h", dt.timedelta(hours=1)), ("7d", dt.timedelta(days=7)),
                              ("10y", dt.timedelta(days=3650))):
            window = Filters.ending(until, length)
            signals = recent_signals(con, window)
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                recent_signals(con, window)
                times.append(time.perf_counter() - started)
            print(f"window {label:>4}: {signals.runs:>9,} runs, {signals.steps:>10,} steps: "
                  f"median {statistics.median(times) * 1000:.1f} ms, max "
                  f"{max(times) * 1000:.1f} ms")
    finally:
        con.close()
        shutil.rmtree(copy.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
