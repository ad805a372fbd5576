"""Where the derivation's CPU goes, statement by statement, on bench_conventions_ingest's
payloads: the same writes and turns (a derivation every 20 transactions of 4 requests), in one
process, each statement of store/derive/statements.py timed as it runs.

    .venv/bin/python -m bench.bench_derivation_statements [--spans 40000]
                                                          [--payloads receivers|genai|strays]
                                                          [--top 25] [--repeat 0]

Printed: the derivation's CPU per span in all, then the `--top` statements by CPU, each with
its file, its rank in the file, the start of its SQL, how many times it ran, its CPU
milliseconds in all and per 10,000 spans; and the statements a gate skipped. With `--repeat N`,
the statements' figures are instead the least of N derivations of every stored span at once,
each rolled back (all spans written first, none derived): steadier, for comparing statements. CPU is
process_time (every thread of the process: DuckDB runs a statement on several). Against another
revision, `python -m bench.ab --base REV -- bench.bench_derivation_statements ...` prints both
sides' figures for the statements that both run alike.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import duckdb

from bench.bench_conventions_ingest import (
    DERIVE_EVERY,
    REQUESTS_PER_TRANSACTION,
    SPANS_PER_REQUEST,
    make_genai_payloads,
    make_stray_payloads,
)
from budgetscope.gc_tuning import relax_gc_for_ingest
from ingest.decode.proto_flatten import flatten_protobuf
from store import FlatBatch, SpanWriter, connect
from store.derive import statements
from store.testing import CHECKPOINT_THRESHOLD, PendingDerivations, refresh_touched

# (file, rank in the file) -> [runs, CPU seconds, its SQL on one line]
SPENT: dict[tuple[str, int], list] = defaultdict(lambda: [0, 0.0, ""])
SKIPPED: dict[tuple[str, int], int] = defaultdict(int)


def _code(sql: str) -> str:
    """The statement's SQL on one line, its comment lines left out."""
    lines = [line.strip() for line in sql.splitlines()]
    return " ".join(line for line in lines if line and not line.startswith("--"))


def timed_execute(con: duckdb.DuckDBPyConnection, name: str,
                  gates: dict[str, bool] | None = None) -> None:
    """statements.execute_file, each statement's CPU added up (the same gates, in the same
    order)."""
    for rank, piece in enumerate(statements.file_statements(con, name)):
        if piece.when is not None and gates is not None and not gates[piece.when]:
            SKIPPED[(name, rank)] += 1
            continue
        cpu = time.process_time()
        result = con.execute(piece.statement)
        if piece.sets_gates and gates is not None:
            row = result.fetchone()
            names = [column[0] for column in result.description or ()]
            gates.update({key: bool(value) for key, value in zip(names, row or (), strict=True)})
        spent = SPENT[(name, rank)]
        spent[0] += 1
        spent[1] += time.process_time() - cpu
        spent[2] = spent[2] or _code(piece.statement.query)


def time_each_statement() -> None:
    """From now on, the derivation's statements run through timed_execute (refresh_touched and
    the rest look execute_file up at each call). A revision before execute_file was public
    (issue 46) has nothing to replace: refused, rather than printing no statement."""
    if not hasattr(statements, "execute_file"):
        raise SystemExit("store/derive/statements.py has no execute_file to time: a revision "
                         "from before issue 46")
    statements.execute_file = timed_execute


def payloads_for(kind: str, spans: int) -> list[bytes]:
    count = max(spans // SPANS_PER_REQUEST, 1)
    if kind == "receivers":
        from bench.bench_receivers import make_payloads
        return make_payloads(count, SPANS_PER_REQUEST)
    return make_stray_payloads(count) if kind == "strays" else make_genai_payloads(count)


def measure(payloads: list[bytes]) -> tuple[int, float, int, int]:
    """Spans stored, derivation CPU seconds, runs and steps derived."""
    relax_gc_for_ingest()
    derive_cpu = 0.0
    spans = 0
    with tempfile.TemporaryDirectory() as folder:
        warm = connect(Path(folder) / "warm-up.duckdb")  # as bench_conventions_ingest: untimed
        warm_batch = FlatBatch()
        for body in payloads[:REQUESTS_PER_TRANSACTION]:
            warm_batch.extend(flatten_protobuf(body))
        SpanWriter(warm).write(warm_batch)
        PendingDerivations(refresh_touched).run(warm)
        warm.close()
        SPENT.clear()
        SKIPPED.clear()
        con = connect(Path(folder) / "bench.duckdb")
        con.execute("SET checkpoint_threshold = ?", [CHECKPOINT_THRESHOLD])
        writer, pending = SpanWriter(con), PendingDerivations(refresh_touched)
        for number, first in enumerate(range(0, len(payloads), REQUESTS_PER_TRANSACTION), 1):
            batch = FlatBatch()
            for body in payloads[first:first + REQUESTS_PER_TRANSACTION]:
                batch.extend(flatten_protobuf(body))
            spans += writer.write(batch).inserted
            if number % DERIVE_EVERY == 0 or first + REQUESTS_PER_TRANSACTION >= len(payloads):
                cpu = time.process_time()
                pending.run(con)
                derive_cpu += time.process_time() - cpu
        runs, steps = con.execute("SELECT (SELECT count(*) FROM runs), "
                                  "(SELECT count(*) FROM steps)").fetchone()
        con.close()
    return spans, derive_cpu, runs, steps


def repeated(payloads: list[bytes], times: int) -> tuple[int, float, int, int]:
    """Every span written, then derived at once `times` times, rolled back each time; each
    statement's least CPU is kept (spans, the least derivation CPU, runs, steps)."""
    relax_gc_for_ingest()
    least: dict[tuple[str, int], list] = {}
    best = float("inf")
    with tempfile.TemporaryDirectory() as folder:
        con = connect(Path(folder) / "bench.duckdb")
        writer, spans = SpanWriter(con), 0
        for first in range(0, len(payloads), REQUESTS_PER_TRANSACTION):
            batch = FlatBatch()
            for body in payloads[first:first + REQUESTS_PER_TRANSACTION]:
                batch.extend(flatten_protobuf(body))
            spans += writer.write(batch).inserted
        for _ in range(times + 1):  # the first warms
            SPENT.clear()
            SKIPPED.clear()
            con.begin()
            con.execute("CREATE OR REPLACE TEMP TABLE touched_traces AS SELECT trace_id, "
                        "min(since) AS since FROM pending_derivations GROUP BY ALL")
            cpu = time.process_time()
            refresh_touched(con)
            spent = time.process_time() - cpu
            runs, steps = con.execute("SELECT (SELECT count(*) FROM runs), "
                                      "(SELECT count(*) FROM steps)").fetchone()
            con.rollback()
            if not least:
                least = {key: list(value) for key, value in SPENT.items()}
                continue
            best = min(best, spent)
            for key, value in SPENT.items():
                kept = least.setdefault(key, list(value))
                kept[1] = min(kept[1], value[1])
        con.close()
    SPENT.clear()
    SPENT.update(least)
    return spans, best, runs, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=40_000)
    parser.add_argument("--payloads", choices=("receivers", "genai", "strays"),
                        default="receivers")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=0)
    options = parser.parse_args()
    payloads = payloads_for(options.payloads, options.spans)
    time_each_statement()
    spans, derive_cpu, runs, steps = (repeated(payloads, options.repeat) if options.repeat
                                      else measure(payloads))
    in_statements = sum(spent[1] for spent in SPENT.values())
    print(f"{spans:,} spans ({options.payloads} payloads): {runs:,} runs, {steps:,} steps")
    print(f"  derivation, µs CPU per span {derive_cpu / spans * 1e6:10.1f}")
    print(f"  of which in statements, µs per span {in_statements / spans * 1e6:10.1f}")
    ranked = sorted(SPENT.items(), key=lambda item: -item[1][1])
    for (name, rank), (runs_of, cpu, line) in ranked[:options.top]:
        print(f"  {name}#{rank:<3d} x{runs_of:<3d} {cpu * 1e3:8.1f} ms "
              f"{cpu / spans * 1e4 * 1e3:7.1f} ms/10k  {line[:70]}")
    skipped = sorted(f"{name}#{rank}" for (name, rank), times in SKIPPED.items()
                     if (name, rank) not in SPENT)
    print(f"  skipped by their gates: {', '.join(skipped) or 'none'}")


if __name__ == "__main__":
    main()
