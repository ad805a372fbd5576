"""A span is stored once, through span_keys (store/file/schema/span_keys.sql), on a real DuckDB
file: resent, repeated within a batch, mixed with new spans; and retention removes the keys of the
traces it removes, so that such a trace sent again is stored again."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.decode.proto_flatten import flatten_protobuf
from store import FlatBatch, SpanWriter, connect, retain

DAY_NS = 86_400 * 10**9


def batch(*spans: tuple[bytes, bytes, str], start_ns: int | None = None) -> FlatBatch:
    """Spans given as (trace id, span id, name)."""
    start = start_ns or time.time_ns() - 10**9
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    for trace_id, span_id, name in spans:
        scope_spans.spans.add(trace_id=trace_id, span_id=span_id, name=name,
                              start_time_unix_nano=start, end_time_unix_nano=start + 1)
    return flatten_protobuf(request.SerializeToString())


def stored(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    return con.execute("SELECT trace_id, span_id, name FROM spans ORDER BY ALL").fetchall()


def keys(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT count(*) FROM span_keys").fetchone()
    return int(row[0]) if row else 0


TRACE_A, TRACE_B = bytes(range(1, 17)), b"\xff" * 8 + b"\x80" + b"\x00" * 6 + b"\x01"


def test_resent_and_repeated_spans_are_stored_once_first_arrival_kept(tmp_path: Path) -> None:
    con = connect(tmp_path / "keys.duckdb")
    writer = SpanWriter(con)
    first = writer.write(batch((TRACE_A, b"\x01" * 8, "a1"), (TRACE_A, b"\x02" * 8, "a2")))
    assert (first.inserted, first.duplicates) == (2, 0)
    again = writer.write(batch((TRACE_A, b"\x01" * 8, "a1 resent"),
                               (TRACE_A, b"\x02" * 8, "a2 resent")))
    assert (again.inserted, again.duplicates) == (0, 2)
    # one stored, one new twice, one new once; the ids' high bits set (UBIGINT, not BIGINT)
    mixed = writer.write(batch((TRACE_A, b"\x01" * 8, "a1 third time"),
                               (TRACE_B, b"\xfe" * 8, "b first"),
                               (TRACE_B, b"\xfe" * 8, "b second"),
                               (TRACE_B, b"\x7f" * 8, "b other")))
    assert (mixed.inserted, mixed.duplicates) == (2, 2)
    assert stored(con) == [
        (TRACE_A.hex(), "01" * 8, "a1"), (TRACE_A.hex(), "02" * 8, "a2"),
        (TRACE_B.hex(), "7f" * 8, "b other"), (TRACE_B.hex(), "fe" * 8, "b first")]
    assert con.execute(
        "SELECT trace_key_hi, trace_key_lo, span_key FROM span_keys "
        "WHERE span_key = ?", [int.from_bytes(b"\xfe" * 8, "big")]).fetchall() == [
        (int.from_bytes(TRACE_B[:8], "big"), int.from_bytes(TRACE_B[8:], "big"),
         int.from_bytes(b"\xfe" * 8, "big"))]
    assert keys(con) == 4
    con.close()


def test_a_batch_all_duplicates_within_itself(tmp_path: Path) -> None:
    con = connect(tmp_path / "keys.duckdb")
    writer = SpanWriter(con)
    result = writer.write(batch(*[(TRACE_A, b"\x05" * 8, f"copy {n}") for n in range(3)]))
    assert (result.inserted, result.duplicates) == (1, 2)
    assert stored(con) == [(TRACE_A.hex(), "05" * 8, "copy 0")]
    con.close()


def test_retention_removes_the_keys_so_a_removed_trace_can_be_stored_again(
        tmp_path: Path) -> None:
    con = connect(tmp_path / "keys.duckdb")
    writer = SpanWriter(con)
    old = time.time_ns() - 40 * DAY_NS
    writer.write(batch((TRACE_B, b"\x01" * 8, "old"), start_ns=old))
    writer.write(batch((TRACE_A, b"\x01" * 8, "recent")))
    assert keys(con) == 2
    retain(con, 30, None)
    assert stored(con) == [(TRACE_A.hex(), "01" * 8, "recent")]
    assert keys(con) == 1
    result = writer.write(batch((TRACE_B, b"\x01" * 8, "old, sent again"), start_ns=old))
    assert result.inserted == 1
    con.close()
