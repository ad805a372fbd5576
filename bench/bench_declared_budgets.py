"""Benchmark: how long a declared-budget change takes to re-measure the affected runs
(docs/guide.md#declaring-budgets).

    .venv/bin/python -m bench.bench_declared_budgets --db bench/out/bench-declared-1000000.duckdb

The database is one `budgetscope ingest` of the sample generator's traces (e.g. 34,483 runs,
~1M spans: `python -m sample_traces.generate --runs 34483 --format pb-stream --out F` then
`budgetscope --db D ingest F`). It is copied; in the copy, one agent (--agent, default
support-agent, about a third of the runs) is made an agent that sends no budget (its spans'
budget.total_ms, budget.deadline_unix_ms and budget.allocated_ms cleared), then everything is
re-derived once (`rebuild_all`, the baseline). Then, timed, each as `budgetscope budgets`
does it on a free file (store the change and mark the affected traces in one transaction,
then derive the marked traces):

- set AGENT 60s (first declaration: every run of the agent), then 30s (a change), unset;
- set --default 45s (the other agents' runs without a budget of their own);
- cap STEP_KEY 5s (the traces holding such a step without its own budget.allocated_ms);

and the same `set AGENT` through `budgetscope serve`'s path: real receivers and the /budgets
endpoint in this process, a POST over HTTP answered once the derivation turn is done.
Each figure is printed beside the full rebuild of the same file in the same run (ratio).
Figures only, never assertions.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import time
from pathlib import Path
from urllib.parse import urlsplit

from budgetscope.server.budgets_endpoint import PATH, BudgetsEndpoint
from ingest.receivers.service import ReceiverConfig, Receivers
from store import Change, DatabaseOwner, DeclaredBudgets, apply, connect, derive_now
from store.testing import rebuild_all

ROOT = Path(__file__).resolve().parent.parent


def strip_budgets(con, agent: str) -> int:  # type: ignore[no-untyped-def]
    """Make `agent` one that sends no budget.total_ms nor allocations (bench only)."""
    con.execute("CREATE TEMP TABLE bench_agent_traces AS "
                "SELECT DISTINCT trace_id FROM runs WHERE agent = ?", [agent])
    con.execute("UPDATE spans SET budget_total_ms = NULL, budget_deadline_unix_ms = NULL, "
                "budget_allocated_ms = NULL "
                "WHERE trace_id IN (SELECT trace_id FROM bench_agent_traces)")
    return int(con.execute("SELECT count(*) FROM bench_agent_traces").fetchone()[0])


def timed_change(con, change: Change) -> tuple[int, int, float, float]:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    applied = apply(con, change)
    stored = time.perf_counter() - started
    derive_now(con)
    return applied.runs, applied.traces, stored, time.perf_counter() - started


def served_change(db: Path, change: Change) -> tuple[int, float, bool]:
    owner = DatabaseOwner(db)
    receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0, routes=lambda parts: {
        PATH: BudgetsEndpoint(DeclaredBudgets(owner, parts.writer), parts.token)}), derive=True)
    receivers.start()
    try:
        time.sleep(2)  # the first derivation turn (nothing marked) passes
        url = urlsplit(receivers.http_endpoint)
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
        started = time.perf_counter()
        connection.request("POST", PATH, body=json.dumps(change.to_json()).encode(),
                           headers={"Content-Type": "application/json"})
        answer = json.loads(connection.getresponse().read())
        seconds = time.perf_counter() - started
        connection.close()
        return int(answer["runs"]), seconds, bool(answer["derived"])
    finally:
        receivers.stop(60)
        owner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="an ingested database (copied)")
    parser.add_argument("--agent", default="support-agent")
    parser.add_argument("--step-key", default="tool:fetch_report")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    work = args.workdir / "bench-declared-work.duckdb"
    for leftover in (work, Path(f"{work}.wal")):
        leftover.unlink(missing_ok=True)
    shutil.copy(args.db, work)
    con = connect(work)
    try:
        spans = int(con.execute("SELECT count(*) FROM spans").fetchone()[0])
        traces = strip_budgets(con, args.agent)
        started = time.perf_counter()
        rebuild_all(con)
        baseline = time.perf_counter() - started
        # marks left by opening the copy (a schema migration marks every trace) are not the
        # changes' work; rebuild_all just derived every trace from all its spans, so they are
        # met (deriving them again would cost a second rebuild)
        con.execute("DELETE FROM pending_derivations")
        runs = int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
        print(f"{spans:,} spans, {runs:,} runs; {args.agent}: {traces:,} traces made to send "
              f"no budget")
        print(f"baseline: rebuild_all (every run re-derived) {baseline:.2f} s")
        print(f"{'change':<34} {'runs':>7} {'traces':>7} {'store+mark s':>13} "
              f"{'total s':>8} {'/ rebuild':>10}")
        for change in (Change("set", args.agent, 60_000), Change("set", args.agent, 30_000),
                       Change("set_default", None, 45_000), Change("unset", args.agent),
                       Change("unset_default"), Change("cap", args.step_key, 5_000),
                       Change("uncap", args.step_key)):
            affected, marked, stored, total = timed_change(con, change)
            label = f"{change.action} {change.target or ''} {change.duration_ms or ''}".strip()
            print(f"{label:<34} {affected:>7,} {marked:>7,} {stored:>13.2f} {total:>8.2f} "
                  f"{total / baseline:>10.2f}")
    finally:
        con.close()
    affected, seconds, derived = served_change(work, Change("set", args.agent, 60_000))
    print(f"{'serve: POST /budgets set ' + args.agent:<34} {affected:>7,} {'':>7} {'':>13} "
          f"{seconds:>8.2f} {seconds / baseline:>10.2f}  (answered after the derivation: "
          f"{derived})")
    work.unlink(missing_ok=True)
    Path(f"{work}.wal").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
