"""The report and run-view timings of bench_queries.py, as a script that imports only the
product's stable front (queries.reports, queries.filters, queries.run_view), so that it runs
against another checkout too:

    python bench/report_timings.py --tree DIR --db FILE [--repeat N] [--lookups N]

prints one JSON line: the median ms of each report call (one untimed call first) and the mean
ms of a run-view lookup, timed with the product of DIR (bench_queries.py --baseline-tree runs
it for the baseline and for this tree in turn).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path


def timed_ms(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    call()  # warm
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times), max(times)


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
    return calls


def lookup_ids(con, lookups: int) -> list[str]:  # type: ignore[no-untyped-def]
    ids = [row[0] for row in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
    return random.Random(1).sample(ids, min(lookups, len(ids)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lookups", type=int, default=50)
    args = parser.parse_args()
    tree = args.tree.resolve()
    sys.path.insert(0, str(tree))
    import duckdb

    from queries import reports
    from queries.run_view import load_run

    # the product really is the tree's, not the running venv's editable install
    assert Path(reports.__file__).resolve().is_relative_to(tree), reports.__file__
    con = duckdb.connect(str(args.db), read_only=True)
    con.execute("SET enable_progress_bar = false")
    figures = {name: timed_ms(call, args.repeat)[0] for name, call in report_calls(con).items()}
    picks = lookup_ids(con, args.lookups)
    figures["run view (load_run)"] = timed_ms(
        lambda: [load_run(con, run_id) for run_id in picks], 1)[0] / len(picks)
    con.close()
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
