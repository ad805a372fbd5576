"""The read API's bounds (POST /cli): its pool is its own and bounded, so that calls beyond it
are answered 503 with Retry-After while exports and health checks go on being answered.

In process: real receivers on 127.0.0.1 over a real DuckDB file, the real CliEndpoint and
ServedCommands; the pool is filled with real threads that wait on an event, standing for slow
reports, so that the moment it is full is certain rather than timed."""

from __future__ import annotations

import base64
import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from budgetscope.commands.served_cli import RefusedCommand, ServedCommands
from ingest.receivers.bounded_pool import BoundedPool, PoolFull
from ingest.receivers.cli_endpoint import PATH, CliEndpoint
from ingest.receivers.operations import OperatorPages
from ingest.receivers.service import ReceiverConfig, Receivers
from store.owner import DatabaseOwner
from tests.test_receivers_common import raw_request

TOKEN = "bounds-token"


def test_a_full_pool_refuses_and_frees_its_slots() -> None:
    pool = BoundedPool(1, 1, "test-bounded")
    release = threading.Event()
    try:
        running = [pool.submit(release.wait, 30) for _ in range(2)]
        with pytest.raises(PoolFull):
            pool.submit(lambda: None)
        release.set()
        for future in running:
            future.result(30)
        assert pool.submit(lambda: 7).result(30) == 7
    finally:
        release.set()
        pool.shutdown()


@pytest.fixture
def receivers(tmp_path: Path) -> Iterator[tuple[Receivers, CliEndpoint]]:
    owner = DatabaseOwner(tmp_path / "bounds.duckdb")
    receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0, token=TOKEN),
                          derive=True)
    endpoint = CliEndpoint(ServedCommands(owner, seconds=60).run, RefusedCommand,
                           receivers.http.token)
    receivers.http.add_route(PATH, endpoint)
    receivers.http.pages.update(OperatorPages(receivers.committer, receivers.exporter.counters,
                                              receivers.http.token).pages())
    receivers.start()
    try:
        yield receivers, endpoint
    finally:
        receivers.stop(10)
        owner.close()


def _send(receivers: Receivers, method: str, path: str, body: bytes | None,
          content_type: str) -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(receivers.http.endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        connection.request(method, path, body=body, headers={
            "Content-Type": content_type, "Authorization": f"Bearer {TOKEN}"})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_slow_calls_never_hold_exports_or_health(receivers) -> None:
    served, endpoint = receivers
    release = threading.Event()
    ask = json.dumps({"argv": ["report", "weekly"]}).encode()
    try:
        slow = [endpoint.pool.submit(release.wait, 60) for _ in range(endpoint.pool.limit)]
        status, headers, body = _send(served, "POST", PATH, ask, "application/json")
        assert status == 503 and headers.get("Retry-After") == "1", body
        assert "the most at once" in json.loads(body)["error"]
        # meanwhile the exports and the operator's pages are answered as ever
        export = raw_request(5).SerializeToString()
        assert _send(served, "POST", "/v1/traces", export, "application/x-protobuf")[0] == 200
        assert _send(served, "GET", "/healthz", None, "text/plain")[0] == 200
    finally:
        release.set()
    for future in slow:
        future.result(60)
    status, _, body = _send(served, "POST", PATH, ask, "application/json")
    assert status == 200
    answer = json.loads(body)
    assert answer["status"] == 0 and base64.b64decode(answer["stdout"]).startswith(b"week,")
