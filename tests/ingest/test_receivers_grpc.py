"""OTLP/gRPC receiver against the real OpenTelemetry SDK exporter and raw stubs."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.support.receivers import (
    SMALL_LIMIT,
    Gate,
    Running,
    raw_request,
    running_receivers,
    sdk_spans,
)

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def server(tmp_path: Path):
    with running_receivers(tmp_path) as running:
        yield running


def call(running: Running, body: bytes, *, metadata: tuple[tuple[str, str], ...] = (),
         compression: grpc.Compression | None = None) -> ExportTraceServiceResponse:
    """One Export call with raw bytes (so that bodies the SDK would never send can be sent)."""
    with grpc.insecure_channel(running.grpc_target, options=[
            ("grpc.max_send_message_length", 64 * 1024 * 1024)]) as channel:
        export = channel.unary_unary(EXPORT, request_serializer=None,
                                     response_deserializer=ExportTraceServiceResponse.FromString)
        return export(body, timeout=20, metadata=metadata, compression=compression)


def status_of(running: Running, body: bytes, **kwargs) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call(running, body, **kwargs)
    return raised.value.code(), raised.value.details()


@pytest.mark.parametrize("compression", [grpc.Compression.NoCompression, grpc.Compression.Gzip])
def test_sdk_exporter_stores_spans_once_even_when_resent(server: Running, compression) -> None:
    spans = sdk_spans(25)
    exporter = OTLPSpanExporter(endpoint=server.grpc_target, insecure=True, timeout=10,
                                compression=compression)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert server.count() == 25
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert server.count() == 25
    exporter.shutdown()


def test_partial_success_and_empty_request(server: Running) -> None:
    response = call(server, raw_request(4, bad_trace_ids=1).SerializeToString())
    assert response.partial_success.rejected_spans == 1
    assert "trace_id is 15 bytes" in response.partial_success.error_message
    assert call(server, b"") == ExportTraceServiceResponse()
    assert server.count() == 3


def test_undecodable_is_invalid_argument(server: Running) -> None:
    code, details = status_of(server, b"\xff\xff\xff\xff garbage")
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "not a protobuf" in details


def test_oversize_is_resource_exhausted_even_when_gzipped(server: Running) -> None:
    big = raw_request(1)
    big.resource_spans[0].scope_spans[0].spans[0].name = "x" * (SMALL_LIMIT + 10)
    body = big.SerializeToString()
    assert status_of(server, body)[0] is grpc.StatusCode.RESOURCE_EXHAUSTED
    # Compressed it is tiny on the wire; the limit applies to the decompressed message.
    assert status_of(server, body, compression=grpc.Compression.Gzip)[0] is \
        grpc.StatusCode.RESOURCE_EXHAUSTED
    assert server.count() == 0
    # gzip within the limit is accepted.
    assert call(server, raw_request(3).SerializeToString(),
                compression=grpc.Compression.Gzip) == ExportTraceServiceResponse()
    assert server.count() == 3


def test_bearer_token_required_when_configured(tmp_path: Path) -> None:
    with running_receivers(tmp_path, token="s3cret") as server:
        body = raw_request(2).SerializeToString()
        assert status_of(server, body)[0] is grpc.StatusCode.UNAUTHENTICATED
        assert status_of(server, body, metadata=(("authorization", "Bearer nope"),))[0] is \
            grpc.StatusCode.UNAUTHENTICATED
        call(server, body, metadata=(("authorization", "Bearer s3cret"),))
        exporter = OTLPSpanExporter(endpoint=server.grpc_target, insecure=True, timeout=10,
                                    headers={"authorization": "Bearer s3cret"})
        assert exporter.export(sdk_spans(3)) is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert server.count() == 5


def test_writer_behind_is_unavailable(tmp_path: Path) -> None:
    gate = Gate()
    with running_receivers(tmp_path, after_write=gate, max_lag_seconds=0.2) as server:
        results: list[object] = []
        first = threading.Thread(target=lambda: results.append(
            call(server, raw_request(2).SerializeToString())))
        first.start()
        assert gate.entered.wait(10)
        queued = threading.Thread(target=lambda: results.append(
            call(server, raw_request(2).SerializeToString())))
        queued.start()
        time.sleep(0.6)
        code, details = status_of(server, raw_request(1, seed=os.urandom(16)).SerializeToString())
        assert code is grpc.StatusCode.UNAVAILABLE and "behind" in details
        gate.release.set()
        first.join(10)
        queued.join(10)
        assert len(results) == 2
        assert server.count() == 4


@pytest.mark.slow
def test_writer_behind_is_unavailable_with_retry_info(tmp_path: Path) -> None:
    """OTLP/gRPC Throttling: UNAVAILABLE carrying google.rpc.RetryInfo, both in the standard
    grpc-status-details-bin Status and under the key the OTel Python exporter reads."""
    gate = Gate()
    with running_receivers(tmp_path, after_write=gate, max_lag_seconds=0.2) as server:
        server.receivers.committer.retry_after_seconds = 7
        first = threading.Thread(target=call, args=(server, raw_request(2).SerializeToString()))
        first.start()
        assert gate.entered.wait(10)
        queued = threading.Thread(target=call, args=(server, raw_request(2).SerializeToString()))
        queued.start()
        time.sleep(0.6)
        with pytest.raises(grpc.RpcError) as raised:
            call(server, raw_request(1, seed=os.urandom(16)).SerializeToString())
        error = raised.value
        trailers = dict(error.trailing_metadata())
        gate.release.set()
        first.join(10)
        queued.join(10)

    assert error.code() is grpc.StatusCode.UNAVAILABLE and "behind" in error.details()
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert status.code == grpc.StatusCode.UNAVAILABLE.value[0]
    assert "behind" in status.message
    [detail] = status.details
    retry = error_details_pb2.RetryInfo()
    assert detail.Unpack(retry)
    assert (retry.retry_delay.seconds, retry.retry_delay.nanos) == (7, 0)
    alone = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
    assert alone.retry_delay.seconds == 7


@pytest.mark.slow
def test_sdk_exporter_waits_the_retry_delay_then_succeeds(tmp_path: Path) -> None:
    """The SDK exporter's first retry comes after 0.8-1.2 s of its own backoff; with our
    RetryInfo of 4 s it must wait those 4 s, then its retry is committed."""
    gate = Gate()
    with running_receivers(tmp_path, after_write=gate, max_lag_seconds=0.2) as server:
        server.receivers.committer.retry_after_seconds = 4
        counters = server.receivers.counters
        first = threading.Thread(target=call, args=(server, raw_request(2).SerializeToString()))
        first.start()
        assert gate.entered.wait(10)
        queued = threading.Thread(target=call, args=(server, raw_request(2).SerializeToString()))
        queued.start()
        time.sleep(0.6)
        exporter = OTLPSpanExporter(endpoint=server.grpc_target, insecure=True, timeout=30)
        results: list[SpanExportResult] = []
        sdk = threading.Thread(target=lambda: results.append(exporter.export(sdk_spans(3))))
        sdk.start()
        deadline = time.monotonic() + 10
        while not counters.snapshot()["requests_refused"].get(("grpc", "unavailable")):
            assert time.monotonic() < deadline, "the SDK's first attempt was never refused"
            time.sleep(0.01)
        refused_at = time.monotonic()
        gate.release.set()  # the writer catches up at once: only the delay holds the retry
        sdk.join(30)
        retried_after = time.monotonic() - refused_at
        first.join(10)
        queued.join(10)
        exporter.shutdown()
        assert results == [SpanExportResult.SUCCESS]
        assert counters.snapshot()["requests_refused"][("grpc", "unavailable")] == 1
        assert server.count() == 4 + 3
    # A lower bound only (a loaded machine can only make it later): the exporter's own
    # backoff would have retried after at most 1.2 s.
    assert retried_after >= 3.8, retried_after
