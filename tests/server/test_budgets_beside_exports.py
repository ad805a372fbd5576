"""`POST /budgets` never spends ingest capacity: 64 concurrent budget changes, each holding its
request until its runs are re-measured, beside OTLP exports. The changes wait in /budgets' own
small pool and those beyond it are answered 503 with Retry-After; every export is answered
200, none 503 for want of a slot (before, the changes took the exports' 64 slots and 17 of 31
exports sent meanwhile were refused).

In process: real receivers on 127.0.0.1 over a real DuckDB file holding the bundled sample,
the real BudgetsEndpoint and DeclaredBudgets, raw HTTP so that a 503 is seen rather than
retried by an exporter."""

from __future__ import annotations

import http.client
import json
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from budgetscope.server.budgets_endpoint import PATH, THREADS, BudgetsEndpoint
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner, DeclaredBudgets
from tests.support.receivers import raw_request

CHANGES = 64
EXPORTS = 32


@pytest.fixture
def served(sample_file: str, tmp_path: Path) -> Iterator[Receivers]:
    copy = tmp_path / "served.duckdb"
    shutil.copyfile(sample_file, copy)
    owner = DatabaseOwner(copy)
    receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0, routes=lambda parts: {
        PATH: BudgetsEndpoint(DeclaredBudgets(owner, parts.writer), parts.token)}), derive=True)
    receivers.start()
    try:
        yield receivers
    finally:
        receivers.stop(60)
        owner.close()


def _post(receivers: Receivers, path: str, body: bytes, content_type: str
          ) -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(receivers.http_endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=300)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.mark.slow
def test_64_budget_changes_leave_every_export_answered(served: Receivers) -> None:
    start = threading.Barrier(CHANGES + 1)

    def change(index: int) -> tuple[int, dict[str, str], bytes]:
        # The default reaches every run without a budget of its own: each change re-measures.
        body = json.dumps({"action": "set_default", "duration_ms": 1_000 + index}).encode()
        start.wait(30)
        return _post(served, PATH, body, "application/json")

    def export(_: int) -> int:
        return _post(served, "/v1/traces", raw_request(20).SerializeToString(),
                     "application/x-protobuf")[0]

    with ThreadPoolExecutor(CHANGES) as changers, ThreadPoolExecutor(8) as exporters:
        changes = [changers.submit(change, index) for index in range(CHANGES)]
        start.wait(30)
        time.sleep(0.2)  # the changes are in: each holds its request for its re-measure
        exports = list(exporters.map(export, range(EXPORTS)))
        answers = [future.result(300) for future in changes]
    assert exports == [200] * EXPORTS
    statuses = [status for status, _, _ in answers]
    assert set(statuses) <= {200, 503}, statuses
    refused = [headers for status, headers, _ in answers if status == 503]
    # The pool took what it holds (THREADS running, MOST_WAITING waiting); the changes
    # arriving while it was full were told when to come back, and the rest were carried out.
    assert refused and statuses.count(200) >= THREADS, statuses
    assert all(headers.get("Retry-After") == "1" for headers in refused)
