"""GET /healthz, /readyz and /metrics on the OTLP/HTTP port, on real receivers over a
real DuckDB file, fed by the OpenTelemetry SDK exporter and raw requests; the exposition is read
back with a strict parser and compared with hand-counted traffic and hand-worked runs
(tests/support/ops_traces.py)."""

from __future__ import annotations

import datetime as dt
import http.client
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from budgetscope.server.metrics import signal_families
from budgetscope.server.operations import OperatorPages, Readiness
from ingest.receivers.http_routes import Endpoint
from ingest.receivers.service import ReceiverParts
from store import DatabaseOwner, GroupCommitter
from store.testing import refresh_touched
from tests.support.ops_traces import EXPECTED, old_run, ops_runs
from tests.support.prometheus_parser import ExpositionError, parse
from tests.support.receivers import Running, raw_request, running_receivers

TOKEN = "ops-token"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
MINUTE_NS = 60 * 10**9


def get(running: Running, path: str, token: str | None = None
        ) -> tuple[int, dict[str, str], str]:
    url = urlsplit(running.http_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


def post(running: Running, body: bytes, content_type: str = "application/x-protobuf",
         token: str | None = TOKEN) -> int:
    url = urlsplit(running.http_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        headers = {"Content-Type": content_type}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        connection.request("POST", url.path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def pages_of(made: list[OperatorPages], cache_seconds: float = 0.0,
             readiness: Callable[[GroupCommitter], Readiness] | None = None):
    """The operator's pages as serve hands them to the receivers (its routes), each made
    appended to `made`; `readiness` is made from the receivers' writer."""
    def routes(owner: DatabaseOwner, parts: ReceiverParts) -> dict[str, Endpoint]:
        pages = OperatorPages(parts.writer, parts.counters, parts.token,
                              readiness=readiness(parts.writer) if readiness else None,
                              cache_seconds=cache_seconds,
                              sources=[signal_families(owner, dt.timedelta(hours=1))])
        made.append(pages)
        return pages.routes()
    return routes


def scrape(running: Running) -> dict:
    status, headers, body = get(running, "/metrics", TOKEN)
    assert status == 200, body
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse(body)


def export_sdk(running: Running, spans) -> None:
    exporter = OTLPSpanExporter(endpoint=running.http_url, timeout=10,
                                headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


@contextmanager
def serving_pages(folder: Path, cache_seconds: float = 0.0,
                  readiness: Callable[[GroupCommitter], Readiness] | None = None
                  ) -> Iterator[tuple[Running, OperatorPages]]:
    # Derived synchronously in each write, so the signals are exact as soon as a request is
    # answered (serve derives just after; see store/derive/pending.py).
    made: list[OperatorPages] = []
    with running_receivers(folder, token=TOKEN, after_write=refresh_touched,
                           routes=pages_of(made, cache_seconds, readiness)) as running:
        yield running, made[0]


@pytest.fixture
def running(tmp_path: Path):
    """Receivers serving the operator's pages, as serve does."""
    with serving_pages(tmp_path) as (running, _):
        yield running


@pytest.mark.slow
def test_metrics_count_the_traffic_and_report_the_hand_worked_signals(running: Running) -> None:
    now_ns = time.time_ns()
    ops = ops_runs(now_ns - 10 * MINUTE_NS)
    export_sdk(running, ops)  # 10 spans
    export_sdk(running, old_run(now_ns - 120 * MINUTE_NS))  # 2 spans, outside the 1 h window
    assert post(running, raw_request(5, bad_trace_ids=2).SerializeToString()) == 200
    assert post(running, raw_request(3).SerializeToString(), token=None) == 401
    assert post(running, b"{", "application/json") == 400
    with grpc.insecure_channel(running.grpc_target) as channel:
        export = channel.unary_unary(EXPORT, request_serializer=None,
                                     response_deserializer=ExportTraceServiceResponse.FromString)
        export(raw_request(4).SerializeToString(), timeout=30,
               metadata=(("authorization", f"Bearer {TOKEN}"),))
        with pytest.raises(grpc.RpcError) as refused:
            export(raw_request(4).SerializeToString(), timeout=30)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED

    metrics = scrape(running)
    received = metrics["budgetscope_spans_received_total"]
    assert received.kind == "counter"
    assert received.value(transport="http") == 10 + 2 + 5
    assert received.value(transport="grpc") == 4
    accepted = metrics["budgetscope_spans_accepted_total"]
    assert (accepted.value(transport="http"), accepted.value(transport="grpc")) == (15, 4)
    rejected = metrics["budgetscope_spans_rejected_total"]
    assert rejected.samples == {("budgetscope_spans_rejected_total",
                                 (("reason", "bad_id"), ("transport", "http"))): 2}
    refused_requests = metrics["budgetscope_requests_refused_total"]
    assert {dict(labels)["transport"] + "/" + dict(labels)["reason"]: value
            for (_, labels), value in refused_requests.samples.items()} == {
        "http/unauthenticated": 1, "http/undecodable": 1, "grpc/unauthenticated": 1}
    assert metrics["budgetscope_spans_stored_total"].value() == 19
    assert metrics["budgetscope_writer_queue_spans"].value() == 0
    assert metrics["budgetscope_derivation_lag_seconds"].value() == 0  # derived in each write
    commits = metrics["budgetscope_writer_commit_seconds"]
    assert commits.kind == "histogram"
    assert commits.value("_count") == running.receivers.committer.stats.transactions >= 4
    assert commits.value("_sum") > 0
    assert metrics["budgetscope_ready"].value() == 1

    signals = {
        "budgetscope_recent_runs": EXPECTED["runs"],
        "budgetscope_recent_exhausted_runs": EXPECTED["exhausted_runs"],
        "budgetscope_recent_exhaustion_rate": EXPECTED["exhaustion_rate"],
        "budgetscope_recent_client_giveups": EXPECTED["client_timeouts"],
        "budgetscope_recent_client_giveup_rate": EXPECTED["client_timeout_rate"],
        "budgetscope_recent_upstream_failures": EXPECTED["upstream_errors"],
        "budgetscope_recent_upstream_failure_rate": EXPECTED["upstream_error_rate"],
        "budgetscope_recent_write_steps": EXPECTED["write_steps"],
        "budgetscope_recent_reconciliation_rate": EXPECTED["reconciliation_rate"],
        "budgetscope_recent_orphan_writes": EXPECTED["orphan_writes"],
    }
    for name, expected in signals.items():
        assert metrics[name].kind == "gauge"
        assert metrics[name].value(window="1h") == pytest.approx(expected), name


def test_signals_are_cached_and_nan_without_data(tmp_path: Path) -> None:
    with serving_pages(tmp_path, cache_seconds=3_600) as (running, cached):
        signals_are_cached(running, cached)


def signals_are_cached(running: Running, cached: OperatorPages) -> None:
    first = scrape(running)
    assert math.isnan(first["budgetscope_recent_exhaustion_rate"].value(window="1h"))
    export_sdk(running, ops_runs(time.time_ns() - 10 * MINUTE_NS))
    again = scrape(running)  # within the cache period: the database is not asked again
    assert math.isnan(again["budgetscope_recent_exhaustion_rate"].value(window="1h"))
    assert again["budgetscope_spans_accepted_total"].value(transport="http") == 10  # live
    cached.cache_seconds = 0
    fresh = scrape(running)
    assert fresh["budgetscope_recent_exhaustion_rate"].value(window="1h") == 0.5


def test_health_needs_no_token_metrics_do(running: Running) -> None:
    assert get(running, "/healthz")[::2] == (200, "ok\n")
    assert get(running, "/readyz")[::2] == (200, "ready\n")
    status, headers, _ = get(running, "/metrics")
    assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
    assert get(running, "/metrics", "wrong")[0] == 401
    assert get(running, "/v1/traces")[0] == 405  # other GETs are still refused


def test_readyz_says_why_when_the_writer_falls_behind(tmp_path: Path) -> None:
    def readiness(writer: GroupCommitter) -> Readiness:
        return Readiness(writer, max_queued_spans=1_000, max_wait_seconds=0.2)

    with serving_pages(tmp_path, readiness=readiness) as (running, _):
        readyz_says_why(running)


def readyz_says_why(running: Running) -> None:
    committer = running.receivers.committer
    gate, busy = threading.Event(), threading.Event()

    def hold(con) -> None:  # a long maintenance job on the writer (e.g. a retention slice)
        busy.set()
        gate.wait(60)

    held = committer.run_in_writer(hold)
    assert busy.wait(30)
    answers: list[int] = []
    sender = threading.Thread(target=lambda: answers.append(
        post(running, raw_request(5).SerializeToString())))
    sender.start()
    try:
        deadline = time.monotonic() + 30
        while committer.queued_spans == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert committer.queued_spans == 5
        # The other thresholds, asked directly while the batch waits.
        assert Readiness(committer, max_queued_spans=3, max_wait_seconds=100).reason() == (
            "writer queue holds 5 spans (ready below 3)")
        # No commit yet since this one started watching: measured from its start.
        stale = Readiness(committer, max_wait_seconds=100, max_commit_age_seconds=0.2)
        time.sleep(0.3)
        assert stale.reason().startswith("no commit for ")
        assert stale.reason().endswith(" s with 5 spans waiting (ready within 0.2 s)")
        status, headers, body = get(running, "/readyz")
        assert status == 503 and headers["Retry-After"] == "2"
        assert body.startswith("not ready: oldest queued batch has waited ")
        assert body.endswith(" s (ready below 0.2 s)\n")
        metrics = scrape(running)
        assert metrics["budgetscope_ready"].value() == 0
        assert metrics["budgetscope_writer_queue_spans"].value() == 5
        assert metrics["budgetscope_writer_oldest_wait_seconds"].value() >= 0.3
        assert get(running, "/healthz")[0] == 200  # behind is not dead
    finally:
        gate.set()
        held.result(30)
        sender.join(30)
    assert answers == [200]
    assert get(running, "/readyz")[0] == 200
    committer.close(30)
    assert get(running, "/healthz")[::2] == (503, "not alive: the writer thread has stopped\n")
    assert get(running, "/readyz")[::2] == (503, "not ready: the writer thread has stopped\n")


def test_the_parser_is_strict() -> None:
    good = "# HELP a_total x\n# TYPE a_total counter\na_total{k=\"v\"} 1\n"
    assert parse(good)["a_total"].value(k="v") == 1
    for bad in (good.rstrip("\n"), "a_total 1\n", good + "# TYPE a_total counter\n",
                good.replace("1\n", "one\n"), good.replace('"v"', "v"),
                "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n",
                "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\n"
                "h_sum 1\nh_count 2\n"):
        with pytest.raises(ExpositionError):
            parse(bad)
