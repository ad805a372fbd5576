"""Shared by the receiver tests: a real server on 127.0.0.1 (free ports) over a real database,
spans made by the real OpenTelemetry SDK, and hand-built requests for the error paths
(bench/support/otlp.py's raw_request, which the benchmarks send too)."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.support.otlp import raw_request
from ingest.receivers.http_routes import Endpoint
from ingest.receivers.limits import Limits
from ingest.receivers.service import ReceiverConfig, ReceiverParts, Receivers
from store import DatabaseOwner
from store.testing import AfterWrite

__all__ = ["PROTOBUF", "SMALL_LIMIT", "Gate", "Running", "Served", "post", "raw_request",
           "running_receivers", "sdk_spans", "serving"]
SMALL_LIMIT = 1024 * 1024  # bodies over 1 MiB are refused in these tests
PROTOBUF = "application/x-protobuf"


@dataclass
class Running:
    owner: DatabaseOwner
    receivers: Receivers

    @property
    def http_url(self) -> str:
        return self.receivers.http_endpoint

    @property
    def grpc_target(self) -> str:
        return self.receivers.grpc_endpoint

    def count(self, sql: str = "SELECT count(*) FROM spans") -> int:
        cursor = self.owner.cursor()
        try:
            row = cursor.execute(sql).fetchone()
        finally:
            cursor.close()
        return int(row[0]) if row else 0


@contextmanager
def running_receivers(
    folder: Path, *, token: str | None = None, after_write: AfterWrite | None = None,
    max_lag_seconds: float = 5.0, commit_timeout: float = 30.0, body_timeout: float = 60.0,
    socket_timeout: float = 30.0,
    routes: Callable[[DatabaseOwner, ReceiverParts], Mapping[str, Endpoint]] | None = None,
) -> Iterator[Running]:
    """`routes`: more routes on the OTLP/HTTP port (as serve hands its pages), made from the
    database's owner and the receivers' parts."""
    owner = DatabaseOwner(folder / "receivers.duckdb")
    limits = Limits(max_body_bytes=SMALL_LIMIT, commit_timeout=commit_timeout,
                    body_timeout=body_timeout, socket_timeout=socket_timeout)
    config = ReceiverConfig(host="127.0.0.1", http_port=0, grpc_port=0, token=token,
                            limits=limits, max_lag_seconds=max_lag_seconds,
                            routes=None if routes is None else lambda parts: routes(owner, parts))
    receivers = Receivers(owner, config)
    receivers.committer.writer.after_write = after_write  # before any batch is written
    receivers.start()
    try:
        yield Running(owner, receivers)
    finally:
        receivers.stop(10)
        owner.close()


def sdk_spans(count: int, service: str = "agent-under-test") -> Sequence[ReadableSpan]:
    """`count` finished spans of one run (a root with budget.total_ms and tool-call children),
    made by the OpenTelemetry SDK itself."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("budgetscope.tests")
    with tracer.start_as_current_span("run", attributes={"budget.total_ms": 60_000}):
        for index in range(count - 1):
            with tracer.start_as_current_span(
                f"tool {index}", attributes={"gen_ai.operation.name": "execute_tool",
                                             "gen_ai.tool.name": "fetch_report"}):
                pass
    provider.shutdown()
    return memory.get_finished_spans()


def post(running: Running, body: bytes, content_type: str = PROTOBUF,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(running.http_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.request("POST", url.path, body=body,
                           headers={"Content-Type": content_type, **(headers or {})})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


class Gate:
    """An after_write hook that holds the writer inside its transaction until released: a
    writer that has fallen behind, without touching our code."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.entered.set()
        assert self.release.wait(30)


@dataclass
class Served:
    """Receivers with the limits a test chose (`serving`), where `post` reaches them."""

    owner: DatabaseOwner
    receivers: Receivers

    @property
    def endpoint(self) -> str:
        return self.receivers.http_endpoint

    http_url = endpoint  # what post() reads


@contextmanager
def serving(folder: Path, limits: Limits) -> Iterator[Served]:
    owner = DatabaseOwner(folder / "hostile.duckdb")
    receivers = Receivers(owner, ReceiverConfig(host="127.0.0.1", http_port=0, grpc_port=0,
                                                limits=limits))
    receivers.start()
    try:
        yield Served(owner, receivers)
    finally:
        receivers.stop(10)
        owner.close()
