"""The token's guards: wrong tokens are paced per client address, each surface on its own (the
OTLP/HTTP port's routes, OTLP/gRPC, the dashboard), and the right token is let through however
many wrong ones came from its address; the redirect after `?token=` only ever goes to a path
of the dashboard, and the CLI's client never follows a redirect to another origin with its
token. Real receivers and a real dashboard process on 127.0.0.1; a second loopback address
(127.0.0.2) is another client."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from budgetscope.server.cli_endpoint import PATH as CLI_PATH
from budgetscope.server.cli_endpoint import CliEndpoint
from budgetscope.server.operations import OperatorPages
from ingest.receivers.auth import BURST, REFILL_SECONDS, FailedTokens, grpc_client
from ingest.receivers.http_routes import Endpoint
from ingest.receivers.service import ReceiverConfig, ReceiverParts, Receivers
from store import DatabaseOwner
from tests.support import ui
from tests.support.receivers import raw_request
from tests.support.ui import TOKEN, tiny_db

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_pace_of_wrong_tokens() -> None:
    clock = Clock()
    pace = FailedTokens(clock=clock)
    for _ in range(BURST - 1):
        pace.failed("10.0.0.1")
        assert pace.wait("10.0.0.1") == 0  # a typo, a rotated token: answered as usual
    pace.failed("10.0.0.1")
    assert pace.wait("10.0.0.1") == pytest.approx(REFILL_SECONDS)
    assert pace.wait("10.0.0.2") == 0  # another client is not held back
    clock.now += REFILL_SECONDS
    assert pace.wait("10.0.0.1") == 0  # one more try earned
    pace.failed("10.0.0.1")
    assert pace.wait("10.0.0.1") == pytest.approx(REFILL_SECONDS)
    clock.now += BURST * REFILL_SECONDS
    assert pace.wait("10.0.0.1") == 0


def test_grpc_peers_are_addresses() -> None:
    assert grpc_client("ipv4:127.0.0.1:5000") == "127.0.0.1"
    assert grpc_client("ipv6:%5B::1%5D:5000") == "::1"
    assert grpc_client("ipv6:[::1]:5000") == "::1"


@pytest.fixture()
def receivers(tmp_path: Path) -> Iterator[Receivers]:
    owner = DatabaseOwner(tmp_path / "tokens.duckdb")
    from budgetscope.server.read_api import ServedCommands

    def routes(parts: ReceiverParts) -> dict[str, Endpoint]:
        return {CLI_PATH: CliEndpoint(ServedCommands(owner, group=cli, seconds=60), parts.token),
                **OperatorPages(parts.writer, parts.counters, parts.token).routes()}

    running = Receivers(owner, ReceiverConfig(host="127.0.0.1", http_port=0, grpc_port=0,
                                              token=TOKEN, routes=routes))
    running.start()
    yield running
    running.stop(10)
    owner.close()


def _http(receivers: Receivers, method: str, path: str, token: str, source: str = "127.0.0.1",
          body: bytes | None = None, content_type: str = "application/x-protobuf"
          ) -> tuple[int, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", receivers.http_port, timeout=30,
                                            source_address=(source, 0))
    try:
        connection.request(method, path, body=body, headers={
            "Authorization": f"Bearer {token}", "Content-Type": content_type})
        response = connection.getresponse()
        response.read()
        return response.status, dict(response.getheaders())
    finally:
        connection.close()


def test_wrong_tokens_on_the_http_port_are_paced_per_client(receivers: Receivers) -> None:
    export = raw_request(2).SerializeToString()
    routes = [("POST", "/v1/traces", export, "application/x-protobuf"),
              ("POST", CLI_PATH, b'{"argv": ["report", "weekly"]}', "application/json"),
              ("GET", "/metrics", None, "text/plain")]
    answers = [_http(receivers, *routes[n % 3][:2], token=f"wrong-{n:012d}",
                     body=routes[n % 3][2], content_type=routes[n % 3][3])[0]
               for n in range(BURST)]
    assert answers == [401] * BURST
    status, headers = _http(receivers, "POST", "/v1/traces", "also-wrong-0000000", body=export)
    assert status == 429 and int(headers["Retry-After"]) >= 1
    # The right token from that very address is let through: whoever guessed there, the
    # exporter with the token is not held back; and another address is answered as ever.
    assert _http(receivers, "POST", "/v1/traces", TOKEN, body=export)[0] == 200
    assert _http(receivers, "POST", CLI_PATH, TOKEN, body=b'{"argv": ["report", "weekly"]}',
                 content_type="application/json")[0] == 200
    assert _http(receivers, "POST", "/v1/traces", TOKEN, source="127.0.0.2", body=export)[0] \
        == 200
    # Probes ask for no token and are never held back.
    connection = http.client.HTTPConnection("127.0.0.1", receivers.http_port, timeout=30)
    connection.request("GET", "/healthz")
    assert connection.getresponse().status == 200
    connection.close()
    assert receivers.counters.snapshot()["requests_refused"][("http", "throttled")] \
        == 1


def test_wrong_tokens_on_the_grpc_port_are_paced(receivers: Receivers) -> None:
    body = raw_request(1).SerializeToString()
    with grpc.insecure_channel(receivers.grpc_endpoint) as channel:
        export = channel.unary_unary(EXPORT, request_serializer=None,
                                     response_deserializer=None)

        def code(token: str) -> grpc.StatusCode:
            try:
                export(body, timeout=20, metadata=(("authorization", f"Bearer {token}"),))
            except grpc.RpcError as error:
                return error.code()
            return grpc.StatusCode.OK

        assert [code(f"wrong-{n:012d}") for n in range(BURST)] == \
            [grpc.StatusCode.UNAUTHENTICATED] * BURST
        # Paced, as a retryable answer that tells nothing new; the right token goes through.
        assert code("wrong-again-000000") is grpc.StatusCode.UNAVAILABLE
        assert code(TOKEN) is grpc.StatusCode.OK
    # Each port counts on its own: the HTTP port tells this address "wrong" as ever.
    assert _http(receivers, "POST", "/v1/traces", "wrong-at-http-0000", body=body)[0] == 401
    assert _http(receivers, "POST", "/v1/traces", TOKEN, body=body)[0] == 200


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ui.Dashboard]:
    db = tiny_db(tmp_path_factory.mktemp("token-guards") / "tiny.duckdb")
    app = ui.Dashboard(db, tmp_path_factory.mktemp("logs") / "tokens.log",
                            extra_args=("--token", TOKEN))
    yield app
    app.stop()


def _get(port: int, path: str, source: str = "127.0.0.1", method: str = "GET",
         body: bytes | None = None, headers: dict[str, str] | None = None
         ) -> tuple[int, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                            source_address=(source, 0))
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


@pytest.mark.parametrize("path", ["/%09/evil.example/", "/%0A/evil.example/", "/%0D%0A/evil",
                                  "/%5C%5Cevil.example/", "//evil.example/", "/%5C/evil"])
def test_the_redirect_after_the_token_stays_on_this_server(dashboard: ui.Dashboard,
                                                           path: str) -> None:
    status, headers = _get(dashboard.port, f"{path}?token={TOKEN}", source="127.0.0.3")
    assert status == 303
    location = headers["location"]
    # What a browser does with it: drop tabs and line breaks, read backslashes as slashes.
    browsed = location.replace("\t", "").replace("\n", "").replace("\r", "").replace("\\", "/")
    assert browsed.startswith("/") and not browsed.startswith("//"), location
    assert urlsplit(f"http://127.0.0.1{browsed}").hostname == "127.0.0.1"


def test_the_login_form_keeps_an_encoded_path(dashboard: ui.Dashboard) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded",
            "Origin": f"http://127.0.0.1:{dashboard.port}"}
    status, headers = _get(dashboard.port, "/_budgetscope/login", "127.0.0.3", "POST",
                           f"token={TOKEN}&next=/a%2520b%3Frange%3Dall".encode(), form)
    assert status == 303 and headers["location"] == "/a%20b?range=all"


def test_wrong_tokens_on_the_dashboard_are_paced(dashboard: ui.Dashboard) -> None:
    source = "127.0.0.4"
    answers = [_get(dashboard.port, f"/?token=wrong-{n:012d}", source)[0]
               for n in range(BURST)]
    assert answers == [401] * BURST
    status, headers = _get(dashboard.port, "/?token=wrong-again-000000", source)
    assert status == 429 and int(headers["retry-after"]) >= 1
    assert _get(dashboard.port, "/", source,
                headers={"Authorization": "Bearer wrong-bearer-0000"})[0] == 429
    # The owner, from that very address, is let in.
    assert _get(dashboard.port, f"/?token={TOKEN}", source)[0] == 303
    assert _get(dashboard.port, "/", source, headers={"Authorization": f"Bearer {TOKEN}"})[0] \
        == 200
    assert _get(dashboard.port, f"/?token={TOKEN}", "127.0.0.5")[0] == 303
    assert _get(dashboard.port, "/_stcore/health", source)[0] == 200


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def _record(self) -> None:
        type(self).seen.append(dict(self.headers))
        body = b'{"error": "nothing here"}'
        self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _record  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


def _redirector(target: str) -> type[BaseHTTPRequestHandler]:
    class Redirect(BaseHTTPRequestHandler):
        def _redirect(self) -> None:
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _redirect  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    return Redirect


@pytest.fixture()
def redirected() -> Iterator[tuple[str, list[dict[str, str]]]]:
    _Recorder.seen = []
    elsewhere = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    here = ThreadingHTTPServer(("127.0.0.1", 0),
                               _redirector(f"http://localhost:{elsewhere.server_port}"))
    for server in (elsewhere, here):
        # stopped at once, not after serve_forever's default poll of 0.5 s
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield f"http://127.0.0.1:{here.server_port}", _Recorder.seen
    for server in (here, elsewhere):
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("arguments", [["report", "weekly"], ["budgets", "list"],
                                       ["budgets", "set", "--default", "1s"]])
def test_the_cli_never_follows_a_redirect_to_another_origin(redirected, arguments) -> None:
    url, seen = redirected
    result = CliRunner().invoke(cli, ["--server", url, "--token", TOKEN, *arguments])
    assert result.exit_code != 0, result.output
    assert "another origin" in result.output and "not followed" in result.output
    assert seen == []  # nothing, and so no token, reached the other origin
    assert TOKEN not in json.dumps(seen)
