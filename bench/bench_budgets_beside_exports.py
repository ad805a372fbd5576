"""OTLP/HTTP exports beside 64 concurrent budget changes (POST /budgets), against the same
exports alone in the same run: what the exports were answered, and their latency.

    .venv/bin/python -m bench.bench_budgets_beside_exports             # the bundled sample
    .venv/bin/python -m bench.bench_budgets_beside_exports --db FILE   # a copy of FILE

Real receivers (default limits: 64 exports in progress; /budgets its own pool of 2 running and
6 waiting) and the real BudgetsEndpoint over a copy of the database, in this process; 8 client
threads send --exports raw requests of --spans spans each. One agent (--agent) is first made one
that sends no budget (bench_declared_budgets.strip_budgets, then a rebuild), and each change is
a `set_default` to a new duration, so each re-measures every run of it. Figures only.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import logging
import shutil
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.bench_declared_budgets import strip_budgets
from bench.support.otlp import raw_request
from budgetscope.config import SAMPLE_TRACES
from budgetscope.server.budgets_endpoint import PATH, BudgetsEndpoint
from ingest.files.loader import load_files
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner, DeclaredBudgets, connect
from store.testing import rebuild_all


def _post(port: int, path: str, body: bytes, content_type: str) -> tuple[int, float]:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    finally:
        connection.close()


def _exports(port: int, count: int, spans: int) -> list[tuple[int, float]]:
    bodies = [raw_request(spans).SerializeToString() for _ in range(count)]
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda body: _post(port, "/v1/traces", body,
                                                "application/x-protobuf"), bodies))


def _show(label: str, answers: list[tuple[int, float]], base: tuple[float, float] | None
          ) -> tuple[float, float]:
    statuses = collections.Counter(status for status, _ in answers)
    seconds = sorted(latency for _, latency in answers)
    p50 = statistics.median(seconds) * 1e3
    p99 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.99))] * 1e3
    ratio = "" if base is None else f"  ({p50 / base[0]:.2f}x, {p99 / base[1]:.2f}x)"
    print(f"{label:<28} {dict(sorted(statuses.items()))}  p50 {p50:7.1f} ms  "
          f"p99 {p99:7.1f} ms{ratio}")
    return p50, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a database to copy (default: the sample)")
    parser.add_argument("--changes", type=int, default=64)
    parser.add_argument("--exports", type=int, default=64)
    parser.add_argument("--spans", type=int, default=100)
    parser.add_argument("--agent", default="support-agent",
                        help="made budget-less, so that each change re-measures its runs")
    args = parser.parse_args()
    logging.getLogger("budgetscope.receivers").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bench-budgets-exports-") as folder:
        db = Path(folder) / "served.duckdb"
        if args.db:
            shutil.copyfile(args.db, db)
        con = connect(db)
        if not args.db:
            load_files(con, [SAMPLE_TRACES], derive=True)
        strip_budgets(con, args.agent)
        rebuild_all(con)
        con.close()
        owner = DatabaseOwner(db)
        receivers = Receivers(owner, ReceiverConfig(
            http_port=0, grpc_port=0, routes=lambda parts: {
                PATH: BudgetsEndpoint(DeclaredBudgets(owner, parts.writer), parts.token)}),
            derive=True)
        receivers.start()
        port = receivers.http_port
        try:
            cursor = owner.cursor()
            runs = cursor.execute("SELECT count(*), count(*) FILTER (WHERE budget_source IS "
                                  "DISTINCT FROM 'span') FROM runs").fetchone()
            cursor.close()
            print(f"{runs[0]:,} runs, {runs[1]:,} without a budget of their own; "
                  f"{args.exports} exports of {args.spans} spans from 8 threads")
            _exports(port, 8, args.spans)  # warm
            base = _show("exports alone", _exports(port, args.exports, args.spans), None)
            start = threading.Barrier(args.changes + 1)

            def change(index: int) -> tuple[int, float]:
                body = json.dumps({"action": "set_default", "duration_ms": 1_000 + index})
                start.wait(60)
                return _post(port, PATH, body.encode(), "application/json")

            with ThreadPoolExecutor(args.changes) as changers:
                changes = [changers.submit(change, index) for index in range(args.changes)]
                start.wait(60)
                time.sleep(0.2)
                beside = _exports(port, args.exports, args.spans)
                answered = [future.result() for future in changes]
            _show(f"beside {args.changes} changes", beside, base)
            _show("the changes", answered, None)
        finally:
            receivers.stop(60)
            owner.close()


if __name__ == "__main__":
    main()
