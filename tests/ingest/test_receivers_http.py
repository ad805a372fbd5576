"""OTLP/HTTP receiver against the real OpenTelemetry SDK exporter and raw requests."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
import time
import tracemalloc
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.support.receivers import (
    PROTOBUF,
    SMALL_LIMIT,
    Gate,
    Running,
    post,
    raw_request,
    running_receivers,
    sdk_spans,
)

JSON = "application/json"


@pytest.fixture
def server(tmp_path: Path):
    with running_receivers(tmp_path) as running:
        yield running


def rpc_status(body: bytes) -> status_pb2.Status:
    status = status_pb2.Status()
    status.ParseFromString(body)
    return status


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_sdk_exporter_stores_spans_once_even_when_resent(server: Running, compression) -> None:
    spans = sdk_spans(20)
    exporter = OTLPSpanExporter(endpoint=server.http_url, compression=compression, timeout=10)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert server.count() == 20  # answered only after the commit, so already visible
    assert exporter.export(spans) is SpanExportResult.SUCCESS  # an exporter retry
    assert server.count() == 20
    assert server.count("SELECT count(*) FROM spans WHERE budget_total_ms = 60000") == 1
    assert server.count("SELECT count(DISTINCT service_name) FROM spans "
                        "WHERE service_name = 'agent-under-test'") == 1
    exporter.shutdown()


def test_partial_success_counts_refused_spans_protobuf(server: Running) -> None:
    status, headers, body = post(server, raw_request(5, bad_trace_ids=2).SerializeToString())
    assert status == 200 and headers["Content-Type"] == PROTOBUF
    response = ExportTraceServiceResponse.FromString(body)
    assert response.partial_success.rejected_spans == 2
    assert "bad_id ×2" in response.partial_success.error_message
    assert "trace_id is 15 bytes" in response.partial_success.error_message
    assert server.count() == 3


def test_json_with_hex_ids_and_partial_success(server: Running) -> None:
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
         "name": "ok", "startTimeUnixNano": "1764000000000000000",
         "endTimeUnixNano": "1764000001000000000"},
        {"traceId": "5b8efff798038103d269b633813fc6", "spanId": "eee19b7ec3c1b175",
         "name": "short id", "startTimeUnixNano": "1764000000000000000",
         "endTimeUnixNano": "1764000001000000000"},
    ]}]}]}
    status, headers, body = post(server, json.dumps(document).encode(), JSON)
    assert status == 200 and headers["Content-Type"] == JSON
    answer = json.loads(body)
    assert int(answer["partialSuccess"]["rejectedSpans"]) == 1
    assert "15 bytes" in answer["partialSuccess"]["errorMessage"]
    assert server.count("SELECT count(*) FROM spans WHERE trace_id = "
                        "'5b8efff798038103d269b633813fc60c' AND span_id = 'eee19b7ec3c1b174'") == 1


def test_gzip_json_and_chunked_protobuf(server: Running) -> None:
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
         "name": "gz", "startTimeUnixNano": "1764000000000000000",
         "endTimeUnixNano": "1764000001000000000"}]}]}]}
    status, _, body = post(server, gzip.compress(json.dumps(document).encode()), JSON,
                           {"Content-Encoding": "gzip"})
    assert (status, json.loads(body)) == (200, {})
    # Chunked transfer encoding (no Content-Length), as some proxies and collectors send.
    url = urlsplit(server.http_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    payload = raw_request(4).SerializeToString()
    connection.request("POST", url.path, body=iter([payload[:10], payload[10:]]),
                       headers={"Content-Type": PROTOBUF}, encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 200, response.read()
    connection.close()
    assert server.count() == 5


def test_empty_requests_succeed(server: Running) -> None:
    status, _, body = post(server, b"")
    assert status == 200 and ExportTraceServiceResponse.FromString(body) == \
        ExportTraceServiceResponse()
    status, _, body = post(server, b"{}", JSON)
    assert (status, body) == (200, b"{}")
    status, _, _ = post(server, b"", JSON)
    assert status == 200
    assert server.count() == 0


def test_undecodable_bodies_get_400_with_a_status(server: Running) -> None:
    status, headers, body = post(server, b"\xff\xff\xff\xff not protobuf")
    assert status == 400 and headers["Content-Type"] == PROTOBUF
    assert rpc_status(body).code == 3 and "not a protobuf" in rpc_status(body).message
    status, headers, body = post(server, b"{not json", JSON)
    assert status == 400 and headers["Content-Type"] == JSON
    assert json.loads(body)["code"] == 3
    status, _, body = post(server, b'{"resourceSpans": 7}', JSON)
    assert status == 400 and "not OTLP JSON" in json.loads(body)["message"]
    status, _, _ = post(server, b"not gzip at all", PROTOBUF, {"Content-Encoding": "gzip"})
    assert status == 400
    assert server.count() == 0


def test_other_content_types_and_encodings_get_415(server: Running) -> None:
    assert post(server, b"x", "text/plain")[0] == 415
    assert post(server, b"x", "application/grpc")[0] == 415
    assert post(server, b"x", PROTOBUF, {"Content-Encoding": "br"})[0] == 415
    # Parameters of the media type are allowed.
    assert post(server, b"", "application/x-protobuf; charset=binary")[0] == 200


def test_oversize_bodies_get_413_before_or_while_inflating(server: Running) -> None:
    status, _, body = post(server, b"\x00" * (SMALL_LIMIT + 1))
    assert status == 413 and rpc_status(body).code == 8
    # A gzip bomb: 64 MiB of zeros is 64 KiB on the wire. It is refused at the 1 MiB limit;
    # inflating it whole would take 64 MiB.
    bomb = gzip.compress(bytes(64 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < SMALL_LIMIT
    tracemalloc.start()  # the server runs in this process: its allocations are traced too
    try:
        status, _, body = post(server, bomb, PROTOBUF, {"Content-Encoding": "gzip"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert status == 413 and "after decompression" in rpc_status(body).message
    assert peak < 8 * 1024 * 1024, f"{peak:,} bytes allocated while refusing the bomb"
    # Exactly at the limit is fine (and here undecodable, so 400: the limit is not what refused).
    assert post(server, gzip.compress(b"\xff" * SMALL_LIMIT), PROTOBUF,
                {"Content-Encoding": "gzip"})[0] == 400


def test_unknown_path_and_method(server: Running) -> None:
    url = urlsplit(server.http_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    connection.request("GET", "/v1/traces")
    assert connection.getresponse().status == 405
    connection.close()
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    connection.request("POST", "/v1/metrics", body=b"", headers={"Content-Type": PROTOBUF})
    assert connection.getresponse().status == 404
    connection.close()


def test_bearer_token_required_when_configured(tmp_path: Path) -> None:
    with running_receivers(tmp_path, token="s3cret") as server:
        body = raw_request(3).SerializeToString()
        status, headers, answer = post(server, body)
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
        assert rpc_status(answer).code == 16
        assert post(server, body, headers={"Authorization": "Bearer wrong"})[0] == 401
        assert post(server, body, headers={"Authorization": "Basic s3cret"})[0] == 401
        assert server.count() == 0
        assert post(server, body, headers={"Authorization": "Bearer s3cret"})[0] == 200
        exporter = OTLPSpanExporter(endpoint=server.http_url, timeout=10,
                                    headers={"Authorization": "Bearer s3cret"})
        assert exporter.export(sdk_spans(4)) is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert server.count() == 7


@pytest.mark.slow
def test_writer_behind_gets_503_with_retry_after_and_then_commits(tmp_path: Path) -> None:
    gate = Gate()
    with running_receivers(tmp_path, after_write=gate, max_lag_seconds=0.2) as server:
        answers: list[int] = []
        first = threading.Thread(target=lambda: answers.append(
            post(server, raw_request(3).SerializeToString())[0]))
        first.start()
        assert gate.entered.wait(10)  # the writer is now stuck inside the first commit
        queued = threading.Thread(target=lambda: answers.append(
            post(server, raw_request(2).SerializeToString())[0]))
        queued.start()
        time.sleep(0.6)  # the queued batch is now older than max_lag_seconds
        status, headers, body = post(server, raw_request(1).SerializeToString())
        assert status == 503 and int(headers["Retry-After"]) >= 1
        assert rpc_status(body).code == 14 and "behind" in rpc_status(body).message
        # The Status body carries the same delay as a google.rpc.RetryInfo detail.
        [detail] = rpc_status(body).details
        retry = error_details_pb2.RetryInfo()
        assert detail.Unpack(retry)
        assert retry.retry_delay.seconds == int(headers["Retry-After"])
        assert answers == []  # nobody was answered before their commit
        gate.release.set()
        first.join(10)
        queued.join(10)
        assert answers == [200, 200]
        assert server.count() == 5


def test_failed_write_is_503_and_never_acknowledged(tmp_path: Path) -> None:
    def disk_full(con: duckdb.DuckDBPyConnection) -> None:
        raise duckdb.IOException("No space left on device")

    with running_receivers(tmp_path, after_write=disk_full) as server:
        status, headers, body = post(server, raw_request(3).SerializeToString())
        assert status == 503 and "Retry-After" in headers
        assert "No space left" in rpc_status(body).message
        assert server.count() == 0  # rolled back


def test_stop_finishes_in_flight_requests_before_returning(tmp_path: Path) -> None:
    gate = Gate()
    with running_receivers(tmp_path, after_write=gate) as server:
        answers: list[int] = []
        client = threading.Thread(target=lambda: answers.append(
            post(server, raw_request(6).SerializeToString())[0]))
        client.start()
        assert gate.entered.wait(10)
        stopped = threading.Event()
        stopper = threading.Thread(target=lambda: (server.receivers.stop(10), stopped.set()))
        stopper.start()
        time.sleep(0.3)
        assert not stopped.is_set()  # waiting for the in-flight request's commit
        gate.release.set()
        stopper.join(10)
        client.join(10)
        assert stopped.is_set() and answers == [200]
        assert server.count() == 6
        with pytest.raises(OSError):  # no longer listening
            socket.create_connection(("127.0.0.1", server.receivers.http_port), timeout=2)


@pytest.mark.slow
def test_slow_body_is_cut_off(tmp_path: Path) -> None:
    with running_receivers(tmp_path, socket_timeout=0.5, body_timeout=1.0) as server:
        with socket.create_connection(("127.0.0.1", server.receivers.http_port)) as client:
            client.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Type: application/x-protobuf\r\nContent-Length: 100\r\n\r\n"
                           b"0123456789")
            client.settimeout(10)
            started = time.monotonic()
            answer = client.recv(4096)
        assert answer.startswith(b"HTTP/1.1 400") and time.monotonic() - started < 5
        # The server still serves others.
        assert post(server, raw_request(1).SerializeToString())[0] == 200
