"""DNS rebinding against every HTTP surface of `budgetscope serve` that shows or changes data:
the read API (`/cli`), `/budgets`, `/metrics` and the dashboard answer only the loopback names
and `--allowed-host`, and a browser's Origin must be the server itself; the OTLP exports and
the probes stay open to any Host, as the Collector's receivers are.

The shape sent is the one a rebound page sends: the attacker's name in `Host` (with the port
the page was served on) and the same name in `Origin`, over a connection to 127.0.0.1, against
a real serve on loopback with the documented default of no token."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support import ui
from tests.support.receivers import raw_request
from tests.support.serve import rebinding_db, start_serve, stop

EVIL = "evil.example"
ALLOWED = "budgets.internal"


class Served:
    def __init__(self, db: Path, announced: dict, ui_port: int) -> None:
        self.db, self.announced, self.ui_port = db, announced, ui_port
        self.http_port = int(announced["http_port"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = rebinding_db(tmp_path_factory.mktemp("rebinding"))
    ui_port = ui.free_port()
    process, announced = start_serve(db, "--ui-port", str(ui_port), "--allowed-host", ALLOWED)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if _request(ui_port, "GET", "/_stcore/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.3)
        yield Served(db, announced, ui_port)
    finally:
        code, _, err = stop(process)
    assert code == 0, err


def _request(port: int, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _rebound(name: str, port: int) -> dict[str, str]:
    """What a page served as http://NAME:PORT sends to its own origin once NAME is 127.0.0.1."""
    return {"Host": f"{name}:{port}", "Origin": f"http://{name}:{port}"}


CLI_CALL = json.dumps({"argv": ["report", "runs", "--format", "json"]}).encode()
BUDGET_CHANGE = json.dumps({"action": "set_default", "duration_ms": 1}).encode()
JSON = {"Content-Type": "application/json"}
ROUTES = [("POST", "/cli", CLI_CALL), ("GET", "/budgets", None),
          ("POST", "/budgets", BUDGET_CHANGE), ("GET", "/metrics", None)]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES,
                         ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_a_rebound_name_is_refused_on_each_data_route(served: Served, method: str, path: str,
                                                      body: bytes | None) -> None:
    port = served.http_port
    for headers in (_rebound(EVIL, port), {"Host": f"{EVIL}:{port}"},
                    {"Host": f"127.0.0.1:{port}", "Origin": f"http://{EVIL}:{port}"}):
        status, answer = _request(port, method, path, body, {**JSON, **headers})
        assert status == 403, (headers, answer)
        assert b"answers to" in answer or b"another site" in answer, answer
    # The names the server is known by are answered: loopback and --allowed-host.
    for name in ("127.0.0.1", "localhost", ALLOWED):
        status, answer = _request(port, method, path, body if path != "/budgets" or
                                  method == "GET" else None, {**JSON, **_rebound(name, port)})
        assert status in (200, 400), (name, status, answer)  # 400: the empty change body


def test_the_rebound_change_stored_nothing(served: Served) -> None:
    port = served.http_port
    _request(port, "POST", "/budgets", BUDGET_CHANGE, {**JSON, **_rebound(EVIL, port)})
    status, answer = _request(port, "GET", "/budgets", None, {"Host": f"127.0.0.1:{port}"})
    assert status == 200 and json.loads(answer) == {"declarations": []}


def test_the_dashboard_refuses_the_same_shape(served: Served) -> None:
    port = served.ui_port
    status, answer = _request(port, "GET", "/", None, _rebound(EVIL, port))
    assert status == 403 and b"--allowed-host" in answer
    assert _request(port, "GET", "/", None, _rebound(ALLOWED, port))[0] == 200


def test_exports_and_probes_stay_open_to_any_host(served: Served) -> None:
    port = served.http_port
    export = raw_request(3).SerializeToString()
    status, answer = _request(port, "POST", "/v1/traces", export,
                              {"Content-Type": "application/x-protobuf",
                               "Host": f"collector.example:{port}"})
    assert status == 200, answer
    for path in ("/healthz", "/readyz"):
        assert _request(port, "GET", path, None, {"Host": f"{EVIL}:{port}"})[0] == 200, path


def test_the_refusal_names_the_option_that_admits_a_name(served: Served) -> None:
    port = served.http_port
    status, answer = _request(port, "POST", "/cli", CLI_CALL,
                              {**JSON, "Host": f"budgets.example:{port}"})
    assert status == 403
    assert "--allowed-host budgets.example" in json.loads(answer)["error"]
    assert urlsplit(served.announced["cli"]).hostname == "127.0.0.1"
