"""JSON nested 60,000 deep fits in the 64 KiB a body of /budgets or /cli may hold; Python's
parser gives up on it with RecursionError, which used to reach the client as an HTTP 500 (and
the server's log as a traceback). Both answer 400 naming the problem, and go on answering.
Real receivers on 127.0.0.1 over a real DuckDB file, the real endpoints, raw HTTP."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from budgetscope.cli import cli
from budgetscope.server.budgets_endpoint import PATH as BUDGETS
from budgetscope.server.budgets_endpoint import BudgetsEndpoint
from budgetscope.server.cli_endpoint import PATH as CLI
from budgetscope.server.cli_endpoint import CliEndpoint
from budgetscope.server.read_api import ServedCommands
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner, DeclaredBudgets

DEEP = [b"[" * 60_000, b'{"argv": ' + b"[" * 60_000, b'{"action": ' + b"{" * 30_000]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receivers]:
    owner = DatabaseOwner(tmp_path_factory.mktemp("deep-json") / "deep.duckdb")
    receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0, routes=lambda parts: {
        BUDGETS: BudgetsEndpoint(DeclaredBudgets(owner, parts.writer), parts.token),
        CLI: CliEndpoint(ServedCommands(owner, group=cli, seconds=60), parts.token)}))
    receivers.start()
    yield receivers
    receivers.stop(10)
    owner.close()


def _post(receivers: Receivers, path: str, body: bytes) -> tuple[int, bytes]:
    url = urlsplit(receivers.http_endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("path", [BUDGETS, CLI])
@pytest.mark.parametrize("body", DEEP, ids=["array", "in argv", "in a field"])
def test_deep_json_is_a_bad_request(served: Receivers, path: str, body: bytes) -> None:
    assert len(body) < 64 * 1024
    status, answer = _post(served, path, body)
    assert status == 400, answer
    assert "nested too deeply" in json.loads(answer)["error"] or "not JSON" in \
        json.loads(answer)["error"]
    # and the endpoint goes on answering
    assert _post(served, CLI, json.dumps({"argv": ["report", "weekly"]}).encode())[0] == 200


def test_the_cli_client_reads_a_deep_answer_as_a_bad_answer(tmp_path: Path) -> None:
    """A server (or something posing as one) answering deep JSON: a one-line error."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from click.testing import CliRunner

    class Deep(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = b"[" * 60_000
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Deep)
    # stopped at once, not after serve_forever's default poll of 0.5 s
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        result = CliRunner().invoke(cli, ["--server", f"http://127.0.0.1:{server.server_port}",
                                          "report", "weekly"])
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 1, result.output
    assert "not the read API's" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
