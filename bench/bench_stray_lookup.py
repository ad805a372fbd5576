"""Whether the rules across traces stay bounded as a file fills with one-span HTTP traces
(docs/conventions.md, "HTTP client spans in a trace of their own"): the derivation's CPU for the
same turn of new traces, on files already holding more and more strays and runs of the same service.

    .venv/bin/python -m bench.bench_stray_lookup [--stored 0 20000 200000] [--rounds 5]

For each size, a fresh file is filled with bench_conventions_ingest's `strays` payload (16-span
runs one after another, each with 15 one-span HTTP traces inside its calls) and derived, then
one request more of the same shape, later in time, is written and derived `--rounds` times in
rolled-back transactions. Printed: the strays stored, that turn's least derivation CPU, and of
it the statements of the rule across traces (those reading or writing call_hulls, stray_calls
and their temp tables: the turn's strays are looked up among the stored hulls and strays by
service and time, not compared with each of them). The rest of the derivation grows with the
file here only because every span of it was written within the same minute, so that reading
the touched traces' spans scans them all (a live file's zone maps on received_at skip them).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.bench_conventions_ingest import (
    REQUESTS_PER_TRANSACTION,
    SPANS_PER_REQUEST,
    make_stray_payloads,
)
from bench.bench_derivation_statements import SPENT, time_each_statement
from budgetscope.gc_tuning import relax_gc_for_ingest
from ingest.decode.proto_flatten import flatten_protobuf
from store import FlatBatch, SpanWriter, connect
from store.testing import PendingDerivations, refresh_touched

# A request of the payload: 16 runs and their 240 strays (half its 512 spans).
STRAYS_PER_REQUEST = SPANS_PER_REQUEST // 2 - 16
# The statements of the rule across traces, by what they name.
ACROSS = ("stray", "hull", "derive_affected", "derive_closure")


def turn_cpu(stored_strays: int, rounds: int) -> tuple[int, float, float]:
    """(strays stored, least CPU seconds of deriving one more request, and of its statements
    of the rule across traces)."""
    requests = stored_strays // STRAYS_PER_REQUEST
    payloads = make_stray_payloads(requests + 1)  # the last one starts after all the others
    with tempfile.TemporaryDirectory() as folder:
        con = connect(Path(folder) / "bench.duckdb")
        writer, pending = SpanWriter(con), PendingDerivations(refresh_touched)
        for first in range(0, requests, REQUESTS_PER_TRANSACTION):
            batch = FlatBatch()
            for body in payloads[first:min(first + REQUESTS_PER_TRANSACTION, requests)]:
                batch.extend(flatten_protobuf(body))
            writer.write(batch)
            if first // REQUESTS_PER_TRANSACTION % 20 == 19:
                pending.run(con)
        pending.run(con)
        stored = con.execute("SELECT count(*) FROM stray_calls").fetchone()[0]
        batch = FlatBatch()
        batch.extend(flatten_protobuf(payloads[-1]))
        writer.write(batch)
        least = across = float("inf")
        for _ in range(rounds + 1):  # the first warms
            SPENT.clear()
            con.begin()
            con.execute("CREATE OR REPLACE TEMP TABLE touched_traces AS SELECT trace_id, "
                        "min(since) AS since FROM pending_derivations GROUP BY ALL")
            cpu = time.process_time()
            refresh_touched(con)
            least = min(least, time.process_time() - cpu)
            con.rollback()
            across = min(across, sum(spent for _, spent, line in SPENT.values()
                                     if any(word in line for word in ACROSS)))
        con.close()
    return stored, least, across


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, nargs="+", default=[0, 20_000, 200_000])
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    relax_gc_for_ingest()
    time_each_statement()
    print(f"one request more ({SPANS_PER_REQUEST} spans, {STRAYS_PER_REQUEST} strays), "
          f"least of {options.rounds} derivations")
    for size in options.stored:
        stored, cpu, across = turn_cpu(size, options.rounds)
        print(f"  {stored:9,} strays stored: derivation {cpu * 1e3:7.1f} ms CPU, "
              f"of which the rule across traces {across * 1e3:6.1f} ms")


if __name__ == "__main__":
    main()
