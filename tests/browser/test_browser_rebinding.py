"""DNS rebinding in a real browser (Debian's Chromium, headless): a page served as
http://evil.example:PORT whose name then resolves to 127.0.0.1 is same-origin with
`budgetscope serve`'s OTLP/HTTP port, so no CORS preflight stands in its way. Its own fetches
to `/cli` and `/budgets` must still be refused, and nothing it sends may be stored."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ui
from tests.support.serve import rebinding_db, start_serve, stop

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not ui.CHROMIUM.exists(), reason="needs Debian's chromium")

_FETCH = """([path, body]) => fetch(path, {method: body === null ? "GET" : "POST",
    headers: {"Content-Type": "application/json"}, body: body})
  .then(answer => answer.status)"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    db = rebinding_db(tmp_path_factory.mktemp("browser-rebinding"))
    process, announced = start_serve(db, "--no-ui")
    yield db, int(announced["http_port"])
    code, _, err = stop(process)
    assert code == 0, err


@pytest.fixture()
def page(rebinding_browser: object) -> Iterator[object]:
    # The attacker's name now resolves to 127.0.0.1 (conftest.py's rebinding_browser resolves
    # every name so): what the rebinding achieved.
    context = rebinding_browser.new_context()  # type: ignore[attr-defined]
    yield context.new_page()
    context.close()


def test_a_rebound_page_cannot_read_runs_or_change_budgets(served: tuple[Path, int],
                                                           page: object) -> None:
    db, port = served
    # The page is on the attacker's origin, which is now this server's port.
    assert page.goto(f"http://evil.example:{port}/healthz").status == 200  # type: ignore[attr-defined]
    read = json.dumps({"argv": ["report", "runs", "--format", "json"]})
    change = json.dumps({"action": "set_default", "duration_ms": 1})
    assert page.evaluate(_FETCH, ["/cli", read]) == 403  # type: ignore[attr-defined]
    assert page.evaluate(_FETCH, ["/budgets", change]) == 403  # type: ignore[attr-defined]
    assert page.evaluate(_FETCH, ["/budgets", None]) == 403  # type: ignore[attr-defined]
    assert page.evaluate(_FETCH, ["/metrics", None]) == 403  # type: ignore[attr-defined]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", "/budgets")
        answer = connection.getresponse()
        assert answer.status == 200
        assert json.loads(answer.read()) == {"declarations": []}  # nothing was stored
    finally:
        connection.close()
