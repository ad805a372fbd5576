"""The dashboard's access rules and its outside calls in a real browser (Debian's Chromium,
headless, through Playwright): without the token a page shows only the login form;
one visit with `?token=` leaves a cookie and the app then works on every page, websocket
included; a page reached under another Host name is refused; every request the pages make
goes to the dashboard itself (no favicon from fonts.gstatic.com, no usage statistics); and a
chart label shows a name with quotes and ampersands as typed."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.support import ui
from tests.support.ui import TOKEN, tiny_db

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = ui.CHROMIUM
TIMEOUT_MS = 90_000
LABEL = 'say "hi" & <b>bold</b>'

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ui.Dashboard]:
    db = tiny_db(tmp_path_factory.mktemp("browser-access") / "tiny.duckdb")
    dashboard = ui.Dashboard(db, tmp_path_factory.mktemp("logs") / "access.log",
                                  extra_args=("--token", TOKEN))
    yield dashboard
    dashboard.stop()


@pytest.fixture()
def page(rebinding_browser: object) -> Iterator[object]:
    """A tab in which every name resolves to 127.0.0.1 (conftest.py's rebinding_browser)."""
    context = rebinding_browser.new_context(viewport={"width": 1400, "height": 2000})  # type: ignore[attr-defined]
    tab = context.new_page()
    tab.requests = []
    tab.on("request", lambda request: tab.requests.append(request.url))
    tab.sockets = []
    tab.on("websocket", lambda socket: tab.sockets.append(socket))
    yield tab
    context.close()


def test_no_token_shows_only_the_login_page(app: ui.Dashboard, page: object) -> None:
    response = page.goto(f"{app.url}/attribution?range=all")  # type: ignore[attr-defined]
    assert response.status == 401
    assert "needs the token" in page.locator("body").inner_text()  # type: ignore[attr-defined]
    assert page.locator("[data-testid=stApp]").count() == 0  # type: ignore[attr-defined]
    assert not page.sockets  # type: ignore[attr-defined]


def test_token_once_then_the_cookie_opens_every_page(app: ui.Dashboard,
                                                      page: object) -> None:
    page.goto(f"{app.url}/attribution?range=all&token={TOKEN}")  # type: ignore[attr-defined]
    ui.settle(page, 2)
    assert "token" not in urlsplit(page.url).query  # type: ignore[attr-defined]
    assert page.locator("[data-testid=stMain] h1").first.inner_text().strip() == "Attribution"  # type: ignore[attr-defined]
    # A fresh page load in the same browser: no token in the URL, the cookie does it.
    page.goto(f"{app.url}/failures?range=all")  # type: ignore[attr-defined]
    ui.settle(page, 2)
    assert page.sockets and all(  # type: ignore[attr-defined]
        not socket.is_closed() for socket in page.sockets[-1:])  # type: ignore[attr-defined]
    # Chart labels show the name as typed: no `&quot;`, no bold markup.
    page.goto(f"{app.url}/attribution?range=all")  # type: ignore[attr-defined]
    ui.settle(page, 2)
    texts = page.evaluate(  # type: ignore[attr-defined]
        "Array.from(document.querySelectorAll('.js-plotly-plot text'))"
        ".map(t => t.textContent)")
    assert any(LABEL in text for text in texts), texts
    # The literal `<b>` in the text means it was not taken as markup.
    assert not any("&quot;" in text or "&amp;" in text for text in texts), texts


def test_the_login_form_opens_the_dashboard(app: ui.Dashboard, page: object) -> None:
    page.goto(f"{app.url}/failures?range=all")  # type: ignore[attr-defined]
    page.fill("#token", "wrong")  # type: ignore[attr-defined]
    page.click("button[type=submit]")  # type: ignore[attr-defined]
    assert "That token is not this dashboard's" in page.locator("body").inner_text()  # type: ignore[attr-defined]
    page.fill("#token", TOKEN)  # type: ignore[attr-defined]
    page.click("button[type=submit]")  # type: ignore[attr-defined]
    ui.settle(page, 2)
    assert urlsplit(page.url).path == "/failures"  # type: ignore[attr-defined]


def test_a_rebound_name_is_refused(app: ui.Dashboard, page: object) -> None:
    """The attacker's page, on a name that resolves to 127.0.0.1, even with the token."""
    response = page.goto(f"http://rebind.evil.example:{app.port}/?token={TOKEN}")  # type: ignore[attr-defined]
    assert response.status == 403
    assert "DNS rebinding" in page.locator("body").inner_text()  # type: ignore[attr-defined]


def test_the_pages_ask_nothing_of_the_outside(app: ui.Dashboard, page: object) -> None:
    page.goto(f"{app.url}/?range=all&token={TOKEN}")  # type: ignore[attr-defined]
    ui.settle(page, 1)
    for path in ("attribution?range=all", "failures?range=all", "weekly?range=all"):
        page.goto(f"{app.url}/{path}")  # type: ignore[attr-defined]
        ui.settle(page)
    # The late fetches (favicon, metrics) are over: no request for 500 ms (Playwright's
    # "networkidle"; the app's websocket does not count).
    page.wait_for_load_state("networkidle", timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    outside = [url for url in page.requests  # type: ignore[attr-defined]
               if not url.startswith((app.url + "/", "data:", "blob:"))]
    assert outside == [], outside
    icon = page.evaluate(  # type: ignore[attr-defined]
        "Array.from(document.querySelectorAll('link[rel*=icon]')).map(l => l.href)")
    assert icon and all(href.startswith(app.url + "/") for href in icon), icon


@pytest.fixture()
def other_site() -> Iterator[str]:
    """Another local service's page (another port on 127.0.0.1): the same site for cookies,
    another origin; what a malicious local page or a compromised dev server would be."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"<!doctype html><title>other site</title><p>other</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


_OPEN_SOCKET = """url => new Promise(done => {
    const socket = new WebSocket(url, "streamlit");
    socket.onopen = () => { socket.close(); done("open"); };
    socket.onerror = () => done("refused");
})"""


def test_another_origin_cannot_open_the_websocket(app: ui.Dashboard, page: object,
                                                  other_site: str) -> None:
    """Signed in (the cookie is sent to 127.0.0.1 whatever the port), a page of another
    origin still cannot drive the dashboard: its Origin is not the dashboard's."""
    stream = f"ws://127.0.0.1:{app.port}/_stcore/stream"
    page.goto(f"{app.url}/?range=all&token={TOKEN}")  # type: ignore[attr-defined]
    ui.settle(page, 1)
    assert page.evaluate(_OPEN_SOCKET, stream) == "open"  # type: ignore[attr-defined]
    page.goto(other_site)  # type: ignore[attr-defined]
    assert page.evaluate(_OPEN_SOCKET, stream) == "refused"  # type: ignore[attr-defined]
