"""What OTLP log records cost the derivation: re-deriving traces with and without log_records.

    .venv/bin/python -m bench.bench_log_derivation --records 200000 --traces 1000

Loads the bundled sample traces into a fresh database, then times `refresh_touched` over
--traces of its traces (one transaction each round, rolled back so every round derives the
same work) with log_records empty, and again after --records log records were stored (one in
fifty carrying exception.type and the context of a stored span, the rest plain or without
context), interleaved for --rounds rounds. Prints the medians and their ratio: figures, never
assertions (the derivation reads the touched traces' exception records: docs/conventions.md).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from ingest.files.loader import load_files
from store import connect
from store.testing import refresh_touched

ROOT = Path(__file__).resolve().parent.parent

SAMPLE = ROOT / "sample_traces" / "sample.jsonl.gz"


def _records(con, count: int) -> pa.Table:  # type: ignore[no-untyped-def]
    spans = con.execute("SELECT trace_id, span_id, start_ns, resource_id, scope_id "
                        "FROM spans ORDER BY trace_id, span_id").fetchall()
    columns: dict[str, list] = {name: [] for name in (
        "record_key_hi", "record_key_lo", "trace_id", "span_id", "time_ns", "exception_type",
        "resource_id", "scope_id")}
    for index in range(count):
        trace_id, span_id, start, resource, scope = spans[index % len(spans)]
        context = index % 10 != 0
        columns["record_key_hi"].append(index)
        columns["record_key_lo"].append(index)
        columns["trace_id"].append(trace_id if context else None)
        columns["span_id"].append(span_id if context else None)
        columns["time_ns"].append(start + index)
        columns["exception_type"].append("httpx.ReadTimeout" if index % 50 == 1 else None)
        columns["resource_id"].append(resource)
        columns["scope_id"].append(scope)
    return pa.table(columns)


def _derive_once(con, traces: pa.Table) -> float:  # type: ignore[no-untyped-def]
    con.begin()
    try:
        con.register("bench_traces", traces)
        con.execute("CREATE OR REPLACE TEMP TABLE touched_traces AS "
                    "SELECT trace_id, now() AS since FROM bench_traces")
        started = time.perf_counter()
        refresh_touched(con)
        return time.perf_counter() - started
    finally:
        con.rollback()
        con.unregister("bench_traces")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--traces", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        con = connect(Path(folder) / "bench.duckdb")
        load_files(con, [SAMPLE], progress=False, derive=True)
        traces = pa.table({"trace_id": [row[0] for row in con.execute(
            "SELECT DISTINCT trace_id FROM spans ORDER BY trace_id LIMIT ?",
            [args.traces]).fetchall()]})
        records = _records(con, args.records)
        empty, full = [], []
        for _ in range(args.rounds):
            con.execute("DELETE FROM log_records")
            empty.append(_derive_once(con, traces))
            con.register("bench_records", records)
            con.execute(
                "INSERT INTO log_records BY NAME SELECT *, 0::BIGINT AS observed_time_ns, "
                "17::TINYINT AS severity_number, 'ERROR' AS severity_text, '\"x\"' AS body, "
                "'{}' AS attributes, 0::UINTEGER AS dropped_attributes_count, "
                "0::UINTEGER AS flags, '' AS event_name, NULL AS service_name, "
                "now() AS received_at FROM bench_records")
            con.unregister("bench_records")
            full.append(_derive_once(con, traces))
        spans = con.execute("SELECT count(*) FROM spans").fetchone()[0]
        con.close()
    without, with_logs = statistics.median(empty), statistics.median(full)
    print(f"{spans:,} spans; deriving {args.traces:,} traces, median of {args.rounds} rounds:")
    print(f"  log_records empty          {without * 1000:8.1f} ms")
    print(f"  {args.records:>9,} log records    {with_logs * 1000:8.1f} ms   "
          f"ratio {with_logs / without:.2f}")


if __name__ == "__main__":
    main()
