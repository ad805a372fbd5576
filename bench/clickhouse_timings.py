"""The ClickHouse report and run-view timings of bench_clickhouse.py, as a script that imports
only what it needs, where each checkout has it, so that it runs against another checkout too:

    python bench/clickhouse_timings.py --tree DIR --url chdb:///FOLDER [--repeat N]

prints one JSON line: the median ms of each `budgetscope report` report and of the run view on
that backend (one untimed call first), timed with the product of DIR (bench_clickhouse.py
--baseline-tree runs it for the baseline and for this tree in turn, one process at a time, as
chdb needs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path


def timed_ms(call: Callable[[], object], repeat: int) -> float:
    call()  # warm
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tree = args.tree.resolve()
    sys.path.insert(0, str(tree))
    from queries import reports
    from queries.filters import Filters
    from queries.run_view import load_run
    try:
        from store import clickhouse
    except ImportError:  # a checkout from before the store package
        from store import clickhouse  # type: ignore[no-redef]

    assert Path(reports.__file__).resolve().is_relative_to(tree), reports.__file__
    ch = clickhouse.connect(args.url)
    clickhouse.ensure_derived(ch)
    filters = Filters()
    figures = {name: timed_ms(lambda report=report: report(ch, filters), args.repeat)
               for name, report in reports.REPORTS.items()}
    runs = reports.runs(ch, filters)
    run_id = str(runs["run_id"].iloc[len(runs) // 2])
    figures["run view"] = timed_ms(lambda: load_run(ch, run_id), args.repeat)
    clickhouse.close_all()
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
