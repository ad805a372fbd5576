"""The writer skips the resources and scopes it has already committed (store/write/writer.py), and
that memory never outlives the rows: after retention deletes an orphaned resource, or after a
write rolls back, the next batch that carries it stores it again. Real DuckDB files, real
retention."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ingest.decode.proto_flatten import flatten_protobuf
from store import FlatBatch, SpanWriter, connect, retain

DAY_NS = 86_400 * 10**9


def batch(service: str, scope: str, span_id: int, start_ns: int | None = None) -> FlatBatch:
    start = start_ns or time.time_ns() - 10**9
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value=service)))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = scope
    scope_spans.spans.add(trace_id=span_id.to_bytes(16, "big"), span_id=span_id.to_bytes(8, "big"),
                          name=f"span {span_id}", start_time_unix_nano=start,
                          end_time_unix_nano=start + 1)
    return flatten_protobuf(request.SerializeToString())


def services(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in con.execute(
        "SELECT service_name FROM resources ORDER BY ALL").fetchall()]


def scopes(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in con.execute("SELECT name FROM scopes ORDER BY ALL").fetchall()]


def test_a_resource_retention_removed_is_stored_again_when_it_comes_back(tmp_path: Path) -> None:
    con = connect(tmp_path / "known.duckdb")
    writer = SpanWriter(con)
    old = time.time_ns() - 40 * DAY_NS
    writer.write(batch("old-agent", "old-scope", 1, start_ns=old))
    writer.write(batch("live-agent", "live-scope", 2))
    retain(con, 30, None)  # the old trace goes, and with it its resource and scope
    assert services(con) == ["live-agent"]
    assert scopes(con) == ["live-scope"]
    writer.write(batch("old-agent", "old-scope", 3))  # the same writer, the same resource
    assert services(con) == ["live-agent", "old-agent"]
    assert scopes(con) == ["live-scope", "old-scope"]
    con.close()


def test_a_rolled_back_write_leaves_no_resource_remembered(tmp_path: Path) -> None:
    con = connect(tmp_path / "known.duckdb")

    def fail(_con: duckdb.DuckDBPyConnection) -> None:
        raise RuntimeError("injected failure inside the write's transaction")

    writer = SpanWriter(con, after_write=fail)
    with pytest.raises(RuntimeError, match="injected"):
        writer.write(batch("agent", "scope", 1))
    assert services(con) == [] and scopes(con) == []
    writer.after_write = None
    writer.write(batch("agent", "scope", 2))
    assert services(con) == ["agent"]
    assert scopes(con) == ["scope"]
    assert con.execute("SELECT count(*) FROM spans").fetchone() == (1,)
    con.close()


def test_known_resources_and_new_ones_in_one_batch(tmp_path: Path) -> None:
    con = connect(tmp_path / "known.duckdb")
    writer = SpanWriter(con)
    writer.write(batch("agent-a", "scope-a", 1))
    mixed = batch("agent-a", "scope-a", 2)
    mixed.extend(batch("agent-b", "scope-b", 3))
    assert writer.write(mixed).inserted == 2
    assert services(con) == ["agent-a", "agent-b"]
    assert scopes(con) == ["scope-a", "scope-b"]
    rows = con.execute("SELECT count(*) FROM spans s JOIN resources r USING (resource_id) "
                       "JOIN scopes c USING (scope_id)").fetchone()
    assert rows == (3,)
    con.close()
