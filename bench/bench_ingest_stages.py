"""CPU microseconds per span for each stage of live ingest, measured one stage at a time.

    .venv/bin/python -m bench.bench_ingest_stages [--spans 200000] [--rounds 3]

Wall-clock throughput on a shared 2-core machine moves with the neighbours' load; CPU time
(time.process_time, this process only, one thread) does much less, so this is the figure to
compare before and after a change. The payloads are bench_receivers' (512-span protobuf
requests of 32-span runs with the budget.* attributes, every id distinct). Stages:

  decode   decode_request: protobuf bytes → message objects (upb, in C)
  flatten  flatten_request: message → column lists (Python, the per-span loop)
  fast decode+flatten  flatten_protobuf, what the receivers run: wire classes with raw-bytes
           attributes and a cache of converted attributes (ingest/decode/proto_flatten.py)
  arrow    the batch as the Arrow tables the writer registers
  insert   SpanWriter.write (resources, scopes, spans INSERT OR IGNORE, pending marks, commit)
           into a file database, in 4-request (2,048-span) transactions as the group commit
           makes them under 4 exporters; reported for the first and the last quarter of the
           load, because the primary-key index makes it slower as the table grows
  derive   the runs/steps derivation of the pending traces, every 20 transactions

At 40,000 spans/s two cores give 50 µs of CPU per span for everything, HTTP included.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.bench_receivers import make_payloads
from budgetscope.gc_tuning import relax_gc_for_ingest
from ingest.decode.flatten import flatten_request
from ingest.decode.proto_decode import decode_request
from ingest.decode.proto_flatten import flatten_protobuf
from store import FlatBatch, SpanWriter, connect
from store.testing import CHECKPOINT_THRESHOLD, PendingDerivations, refresh_touched, to_arrow

SPANS_PER_REQUEST = 512
REQUESTS_PER_TRANSACTION = 4


def measure_cpu_stages(payloads: list[bytes], rounds: int) -> dict[str, float]:
    """Best of `rounds` for decode, flatten and arrow (µs per span)."""
    spans = len(payloads) * SPANS_PER_REQUEST
    best: dict[str, float] = {}
    for _ in range(rounds):
        requests = []
        began = time.process_time()
        for body in payloads:
            requests.append(decode_request(body)[0])
        decode = (time.process_time() - began) / spans * 1e6
        batches = []
        began = time.process_time()
        for request in requests:
            batches.append(flatten_request(request))
        flatten = (time.process_time() - began) / spans * 1e6
        del requests
        began = time.process_time()
        for batch in batches:
            to_arrow(batch)
        arrow = (time.process_time() - began) / spans * 1e6
        began = time.process_time()
        for body in payloads:
            flatten_protobuf(body)
        fast = (time.process_time() - began) / spans * 1e6
        for name, value in (("decode", decode), ("flatten", flatten), ("arrow", arrow),
                            ("fast decode+flatten", fast)):
            best[name] = min(best.get(name, value), value)
    return best


def measure_writes(payloads: list[bytes]) -> dict[str, float]:
    """Insert and derive CPU per span, loading every payload into a fresh file database."""
    per_transaction = REQUESTS_PER_TRANSACTION
    transactions = []
    for start in range(0, len(payloads), per_transaction):
        merged = FlatBatch()
        for body in payloads[start:start + per_transaction]:
            flatten_request(decode_request(body)[0], into=merged)
        transactions.append(merged)
    insert_cpu: list[float] = []
    derive_cpu = 0.0
    derived_spans = 0
    with tempfile.TemporaryDirectory() as folder:
        con = connect(Path(folder) / "stages.duckdb")
        con.execute("SET checkpoint_threshold = ?", [CHECKPOINT_THRESHOLD])  # as serve's owner
        writer = SpanWriter(con)
        pending = PendingDerivations(refresh_touched)
        undrived_spans = 0
        for number, batch in enumerate(transactions, 1):
            began = time.process_time()
            writer.write(batch)
            insert_cpu.append((time.process_time() - began) / batch.span_count * 1e6)
            undrived_spans += batch.span_count
            if number % 20 == 0 or number == len(transactions):
                began = time.process_time()
                pending.run(con)
                derive_cpu += time.process_time() - began
                derived_spans += undrived_spans
                undrived_spans = 0
        con.close()
    quarter = max(len(insert_cpu) // 4, 1)
    return {
        "insert (first quarter)": sum(insert_cpu[:quarter]) / quarter,
        "insert (last quarter)": sum(insert_cpu[-quarter:]) / quarter,
        "derive": derive_cpu / max(derived_spans, 1) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000, help="spans loaded by insert")
    parser.add_argument("--rounds", type=int, default=3, help="best of, for CPU-only stages")
    parser.add_argument("--skip-writes", action="store_true", help="decode/flatten/arrow only")
    options = parser.parse_args()
    relax_gc_for_ingest()
    payloads = make_payloads(max(options.spans // SPANS_PER_REQUEST, 1), SPANS_PER_REQUEST)
    cpu = measure_cpu_stages(payloads[:100], options.rounds)
    for name, value in cpu.items():
        print(f"  {name:24s} {value:6.1f} µs CPU per span")
    if not options.skip_writes:
        writes = measure_writes(payloads)
        for name, value in writes.items():
            print(f"  {name:24s} {value:6.1f} µs CPU per span")
        # What live ingest must spend per span at the least: the receivers' decode+flatten,
        # the write at the load's mean, and the derivation (HTTP and the exporters not counted).
        floor = (cpu["fast decode+flatten"] + writes["derive"]
                 + (writes["insert (first quarter)"] + writes["insert (last quarter)"]) / 2)
        print(f"  {'sum, the least per span':24s} {floor:6.1f} µs CPU per span: at most "
              f"{2e6 / floor:,.0f} spans/s on 2 cores kept busy in parallel (40,000 needs "
              "<= 50 µs)")
    print(f"({len(payloads) * SPANS_PER_REQUEST:,} spans in {SPANS_PER_REQUEST}-span requests; "
          "CPU of this process, best of rounds for the CPU-only stages)")


if __name__ == "__main__":
    main()
