"""Disk full: on a small tmpfs the test mounts, the receivers answer 503 with
Retry-After (gRPC UNAVAILABLE) instead of acknowledging, nothing acknowledged is lost, and
ingestion resumes by itself once space returns — no restart.

Mounting needs root: marked `root`, the test is skipped with that reason for anyone else
(tests/conftest.py), and CI, which runs as root, runs it.
"""

from __future__ import annotations

import errno
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from budgetscope.server.operations import Readiness
from ingest.receivers.limits import Limits
from tests.support.receivers import Served, post, raw_request, serving

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
pytestmark = pytest.mark.root


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mount_point)],
                   check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(bytes(1 << 16))
        except OSError as error:
            assert error.errno == errno.ENOSPC
    return filler


def _send_http(served: Served, spans: int) -> tuple[int, dict[str, str], list[tuple[str, str]]]:
    request = raw_request(spans)
    status, headers, _ = post(served, request.SerializeToString())  # type: ignore[arg-type]
    keys = [(s.trace_id.hex(), s.span_id.hex())
            for s in request.resource_spans[0].scope_spans[0].spans]
    return status, headers, keys


def test_disk_full_answers_503_loses_nothing_and_resumes_by_itself(small_disk: Path) -> None:
    with serving(small_disk, Limits()) as served:
        acknowledged: list[tuple[str, str]] = []
        for _ in range(3):
            status, _, keys = _send_http(served, 200)
            assert status == 200
            acknowledged += keys

        filler = _fill(small_disk)
        refused: list[list[tuple[str, str]]] = []
        for _ in range(5):
            status, headers, keys = _send_http(served, 500)
            assert status == 503, status  # never acknowledged while nothing can be written
            assert int(headers["Retry-After"]) >= 1
            refused.append(keys)
        with grpc.insecure_channel(served.receivers.grpc_endpoint) as channel:
            export = channel.unary_unary(
                EXPORT, request_serializer=None,
                response_deserializer=ExportTraceServiceResponse.FromString)
            with pytest.raises(grpc.RpcError) as failure:
                export(raw_request(500).SerializeToString(), timeout=30)
            assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "No space left" in failure.value.details()

        readiness = Readiness(served.receivers.committer)
        assert "No space left" in (readiness.reason() or ""), readiness.reason()

        filler.unlink()  # space returns; nothing restarts
        deadline = time.monotonic() + 30
        status = 503
        while status != 200 and time.monotonic() < deadline:
            status, _, keys = _send_http(served, 50)
            if status == 200:
                acknowledged += keys
            else:
                time.sleep(0.2)
        assert status == 200, "ingestion did not resume after space returned"
        assert readiness.reason() is None
        # The exporters retry what was refused: it is stored now.
        for keys in refused:
            request = raw_request(0)
            scope = request.resource_spans[0].scope_spans[0]
            for trace_id, span_id in keys:
                span = scope.spans.add()
                span.trace_id, span.span_id = bytes.fromhex(trace_id), bytes.fromhex(span_id)
                span.name, span.start_time_unix_nano = "retried", 1_764_000_000_000_000_000
                span.end_time_unix_nano = span.start_time_unix_nano + 1
            assert post(served, request.SerializeToString())[0] == 200  # type: ignore[arg-type]
            acknowledged += keys

        cursor = served.owner.cursor()
        try:
            total, distinct = cursor.execute(
                "SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans").fetchone()
            stored = set(cursor.execute("SELECT trace_id, span_id FROM spans").fetchall())
        finally:
            cursor.close()
    assert total == distinct == len(set(acknowledged))
    assert set(acknowledged) <= stored


def test_a_derivation_on_a_full_disk_fails_with_its_cause(small_disk: Path) -> None:
    """The derivation's commit failing on a full disk raises that cause (what the derivation
    thread logs), not "cannot rollback" from the rollback after it."""
    import duckdb

    from ingest.decode.flatten import flatten_request
    from store import SpanWriter, connect
    from store.testing import PendingDerivations, refresh_touched

    con = connect(small_disk / "derive.duckdb")
    try:
        for _ in range(20):
            SpanWriter(con).write(flatten_request(raw_request(500)))
        con.execute("CHECKPOINT")
        filler = _fill(small_disk)
        with pytest.raises(duckdb.Error) as failure:
            PendingDerivations(refresh_touched).run(con)
        assert "rollback" not in str(failure.value).lower(), failure.value
        assert "space" in str(failure.value).lower(), failure.value
        filler.unlink()
        assert PendingDerivations(refresh_touched).run(con) > 0  # derived once space returns
    finally:
        con.close()
