"""A web page cannot lock the owner and the local exporters out of `budgetscope serve` by
guessing tokens (real Chromium, Debian's, headless). A page on another origin of 127.0.0.1
loads twelve `<img src="http://127.0.0.1:DASHBOARD/?token=guessN">`: the browser sends them
with the real Host, no Origin, and `Sec-Fetch-Dest: image`; each is refused unread (403) and
counted nowhere. Then an export with the right token (the OpenTelemetry SDK's exporter, from
the same address) is acknowledged, and the owner, typing the address with the right token in
the same browser, is let in. Before: the guesses were counted per address, shared with the
receivers, and every request from 127.0.0.1 carrying a token got 429 for as long as the
page kept guessing."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.support import ui
from tests.support.flood import LimitedServe
from tests.support.receivers import sdk_spans
from tests.support.serve import stored
from tests.support.ui import TOKEN

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not ui.CHROMIUM.exists(), reason="needs Debian's chromium")
GUESSES = 12


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LimitedServe]:
    folder = tmp_path_factory.mktemp("cross-site")
    running = LimitedServe(folder / "cross.duckdb", folder / "serve.log", limit=4096,
                           token=TOKEN)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def guessing_page(serve: LimitedServe) -> Iterator[str]:
    """Another origin's page (another port of 127.0.0.1) with the guesses as images."""
    images = "".join(f'<img src="{serve.dashboard}/?token=guess-{n:012d}">'
                     for n in range(GUESSES))
    body = f"<!doctype html><title>cute cats</title>{images}".encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture()
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 2000})  # type: ignore[attr-defined]
    yield context.new_page()
    context.close()


def test_a_page_guessing_tokens_locks_nobody_out(serve: LimitedServe, guessing_page: str,
                                                 page: object, tmp_path: Path) -> None:
    answered: list[int] = []
    page.on("response", lambda response: answered.append(response.status)  # type: ignore[attr-defined]
            if response.url.startswith(serve.dashboard) else None)
    page.goto(guessing_page)  # type: ignore[attr-defined]
    page.wait_for_load_state("load")  # type: ignore[attr-defined]  # every image tried
    assert answered == [403] * GUESSES, answered
    # The page keeps guessing (once more, as a reload does): still nobody is locked out.
    page.reload()  # type: ignore[attr-defined]
    page.wait_for_load_state("load")  # type: ignore[attr-defined]

    exporter = OTLPSpanExporter(endpoint=f"{serve.http}/v1/traces", timeout=30,
                                headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        assert exporter.export(sdk_spans(5, "owner-agent")) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()

    response = page.goto(f"{serve.dashboard}/?token={TOKEN}")  # type: ignore[attr-defined]
    assert response.ok  # type: ignore[union-attr]
    ui.settle(page)
    assert "token" not in urlsplit(page.url).query  # type: ignore[attr-defined]
    assert page.locator("[data-testid=stApp]").count() == 1  # type: ignore[attr-defined]

    assert serve.stop() == 0
    assert stored(serve.db, "SELECT count(*) FROM spans WHERE service_name = 'owner-agent'") \
        == 5
