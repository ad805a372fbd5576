"""`budgetscope serve` as a real process for the tests that need one: started on free ports and
waited for until its sidecar names it, stopped with SIGTERM, and streams of raw OTLP/HTTP and
OTLP/gRPC requests that remember what was acknowledged."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import EllipsisType
from typing import TypeVar
from urllib.parse import urlsplit

import grpc
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.receivers.http_routes import Endpoint
from ingest.receivers.service import ReceiverConfig, ReceiverParts, Receivers
from store import DatabaseOwner, connect, serve_sidecar_path
from tests.support.receivers import raw_request
from tests.support.trace_builder import TraceBuilder, open_db, store

CLI = [sys.executable, "-c", "from budgetscope.cli import main; main()"]
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
START_TIMEOUT = 90  # seconds; imports are slow on a loaded 2-core machine


def environment_with_token(token: str | None) -> dict[str, str]:
    """This process's environment for a child, with BUDGETSCOPE_TOKEN set to `token`, or unset
    when it is None (whatever the test's own environment holds)."""
    env = {key: value for key, value in os.environ.items() if key != "BUDGETSCOPE_TOKEN"}
    if token is not None:
        env["BUDGETSCOPE_TOKEN"] = token
    return env


def start_serve(db: Path, *flags: str, token: str | None = None
                ) -> tuple[subprocess.Popen[str], dict]:
    process = subprocess.Popen(
        [*CLI, "--db", str(db), "serve", "--otlp-http-port", "0", "--otlp-grpc-port", "0",
         *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=environment_with_token(token))
    sidecar = serve_sidecar_path(db)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited {process.returncode}: {process.stderr.read()}")
        try:
            announced = json.loads(sidecar.read_text())
        except (OSError, ValueError):
            announced = None
        if announced and announced.get("pid") == process.pid:
            return process, announced
        time.sleep(0.1)
    process.kill()
    raise AssertionError("serve did not start in time")


def stop(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


def post(endpoint: str, body: bytes, token: str | None = None) -> int:
    headers = {"Content-Type": "application/x-protobuf"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(endpoint, data=body, headers=headers),
                                    timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def stored(db: Path, sql: str = "SELECT count(*) FROM spans") -> int:
    con = connect(db)
    try:
        return int(con.execute(sql).fetchone()[0])
    finally:
        con.close()


def stream_http(endpoint: str, acknowledged: list[tuple[str, str]], stop: threading.Event) -> None:
    """Send 64-span requests until the server dies; remember the spans of every 200."""
    url = endpoint.removeprefix("http://")
    host, _, rest = url.partition(":")
    port, _, path = rest.partition("/")
    while not stop.is_set():
        request = raw_request(64)
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            connection.request("POST", "/" + path, body=request.SerializeToString(),
                               headers={"Content-Type": "application/x-protobuf"})
            if connection.getresponse().status != 200:
                continue
        except OSError:
            return  # the server is gone
        finally:
            connection.close()
        spans = request.resource_spans[0].scope_spans[0].spans
        acknowledged.extend((s.trace_id.hex(), s.span_id.hex()) for s in spans)


def stream_grpc(target: str, acknowledged: list[tuple[str, str]],
                 stop: threading.Event) -> None:
    with grpc.insecure_channel(target) as channel:
        export = channel.unary_unary(EXPORT, request_serializer=None,
                                     response_deserializer=ExportTraceServiceResponse.FromString)
        while not stop.is_set():
            request = raw_request(64)
            try:
                export(request.SerializeToString(), timeout=30)
            except grpc.RpcError:
                return
            spans = request.resource_spans[0].scope_spans[0].spans
            acknowledged.extend((s.trace_id.hex(), s.span_id.hex()) for s in spans)


def rebinding_db(folder: Path) -> Path:
    """A file with one run, for the tests of a served port reached under another name."""
    b = TraceBuilder(seed=34)
    b.run(0, 12_000, None, gen__ai_agent_name="support-agent")
    con = open_db(folder, "rebinding.duckdb")
    store(con, b.finished())
    con.close()
    return folder / "rebinding.duckdb"


class ServedEndpoint:
    """A JSON endpoint of an in-process serve (/budgets, /prices) asked over real HTTP, and the
    runs its owner holds at the moment of the answer. A test names its endpoint's path, token
    and the runs' columns it reads."""

    path: str
    token: str
    runs_sql: str

    def __init__(self, owner: DatabaseOwner, receivers: Receivers) -> None:
        self.owner, self.receivers = owner, receivers

    def request(self, method: str, body: bytes | None = None,
                token: str | None | EllipsisType = ...,
                content_type: str = "application/json") -> tuple[int, dict]:
        """(status, JSON answer); the endpoint's own token unless another (or None) is given."""
        token = self.token if token is ... else token
        url = urlsplit(self.receivers.http_endpoint)
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        try:
            headers = {"Content-Type": content_type}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            connection.request(method, self.path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, json.loads(response.read() or b"{}")
        finally:
            connection.close()

    def change(self, **payload) -> tuple[int, dict]:
        return self.request("POST", json.dumps(payload).encode())

    def runs(self) -> list[tuple]:
        cursor = self.owner.cursor()
        try:
            return cursor.execute(self.runs_sql).fetchall()
        finally:
            cursor.close()


Served = TypeVar("Served", bound=ServedEndpoint)


@contextmanager
def serving_endpoint(served: type[Served], folder: Path,
                     endpoint: Callable[[DatabaseOwner, ReceiverParts], Endpoint],
                     spans: TraceBuilder, runs: int) -> Iterator[Served]:
    """Receivers serving `served.path` (the endpoint made from the owner and the receivers'
    parts, as serve makes /budgets and /prices) on a file of `folder`, once `spans` came in
    through the real OTLP exporter and `runs` runs were derived from them."""
    owner = DatabaseOwner(folder / "served.duckdb")
    receivers = Receivers(owner, ReceiverConfig(
        http_port=0, grpc_port=0, token=served.token,
        routes=lambda parts: {served.path: endpoint(owner, parts)}), derive=True)
    receivers.start()
    try:
        exporter = OTLPSpanExporter(endpoint=receivers.http_endpoint,
                                    headers={"Authorization": f"Bearer {served.token}"})
        assert exporter.export(spans.finished()) == SpanExportResult.SUCCESS
        exporter.shutdown()
        serving = served(owner, receivers)
        deadline = time.monotonic() + 30  # derived beside the writer, within about a second
        while len(serving.runs()) < runs and time.monotonic() < deadline:
            time.sleep(0.05)
        yield serving
    finally:
        receivers.stop(10)
        owner.close()


def cli_as(db: Path, *arguments: str, token: str | None = None
           ) -> subprocess.CompletedProcess[str]:
    """`budgetscope --db DB ARGUMENTS` as a process, with BUDGETSCOPE_TOKEN set to `token` (or
    unset, whatever the test's own environment holds)."""
    return subprocess.run([*CLI, "--db", str(db), *arguments], capture_output=True,
                          text=True, timeout=120, env=environment_with_token(token))
