"""PageHead (dashboard/server/page_head.py): where the server is and the chart and table code's
preload go into the HTML of a page address and nowhere else, a page without charts is not sent
the chart code, and whatever it does not rewrite reaches the browser as it was sent."""

from __future__ import annotations

import asyncio
import gzip

from dashboard.page_list import PAGES, PAGES_WITHOUT_CHARTS
from dashboard.server.access import Message, Receive, Scope, Send
from dashboard.server.page_head import (
    CHART_CHUNK,
    TABLE_CHUNK,
    PageHead,
    chunk,
    head_additions,
)

PAGE = b"<!doctype html><html><head><title>Streamlit</title></head><body></body></html>"
LINK = b'<link rel="modulepreload" crossorigin href="./static/js/PlotlyChart.x.js">'


def hinting(app: object) -> PageHead:
    """The middleware around `app`, with LINK for every page."""
    return PageHead(app, lambda path: LINK)  # type: ignore[arg-type]


class Answer:
    """A downstream ASGI app that answers with fixed messages and records the scope it got."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]],
                 bodies: list[bytes]) -> None:
        self.status, self.headers, self.bodies = status, headers, bodies
        self.seen: Scope | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.seen = scope
        await send({"type": "http.response.start", "status": self.status,
                    "headers": self.headers})
        for index, body in enumerate(self.bodies):
            await send({"type": "http.response.body", "body": body,
                        "more_body": index < len(self.bodies) - 1})


def html_answer(*bodies: bytes) -> Answer:
    return Answer(200, [(b"content-type", b"text/html"), (b"etag", b'"file"'),
                        (b"content-length", str(sum(map(len, bodies))).encode())],
                  list(bodies))


def call(app: object, path: str = "/", method: str = "GET") -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path,
             "headers": [(b"host", b"127.0.0.1"), (b"accept-encoding", b"gzip")]}
    asyncio.run(app(scope, receive, send))  # type: ignore[operator]
    return sent


def body(sent: list[Message]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def headers(sent: list[Message]) -> dict[bytes, bytes]:
    return dict(sent[0]["headers"])


def test_a_page_gets_the_links_before_its_head_ends_with_a_length_that_fits() -> None:
    downstream = html_answer(PAGE[:20], PAGE[20:])  # in two pieces, as a file is streamed
    sent = call(hinting(downstream), "/failures")
    page = body(sent)
    assert page == PAGE.replace(b"</head>", LINK + b"</head>")
    assert int(headers(sent)[b"content-length"]) == len(page)
    # The file's validator would let a browser keep a copy with other additions.
    assert b"etag" not in headers(sent)
    # Asked for uncompressed, so the rewrite is a splice of plain bytes.
    assert downstream.seen is not None
    assert b"accept-encoding" not in dict(downstream.seen["headers"])


def test_what_is_not_a_page_answer_passes_as_it_came() -> None:
    for path, method, downstream in (
            ("/static/js/index.js", "GET", html_answer(PAGE)),  # a file, not a page
            ("/_stcore/health", "GET", html_answer(PAGE)),
            ("/", "HEAD", html_answer(PAGE)),
            ("/", "GET", Answer(304, [(b"etag", b'"file"')], [b""])),
            ("/", "GET", Answer(200, [(b"content-type", b"application/json")], [b"{}"])),
            ("/", "GET", Answer(200, [(b"content-type", b"text/html"),
                                      (b"content-encoding", b"gzip")], [gzip.compress(PAGE)])),
    ):
        sent = call(hinting(downstream), path, method)
        assert sent[0]["status"] == downstream.status, path
        assert sent[0]["headers"] == downstream.headers, path
        assert body(sent) == b"".join(downstream.bodies), path


def test_a_page_without_a_head_end_is_sent_unchanged() -> None:
    sent = call(hinting(html_answer(b"<p>no head</p>")))
    assert body(sent) == b"<p>no head</p>"
    assert headers(sent)[b"content-length"] == b"14"


def test_a_page_that_draws_no_charts_is_not_sent_the_chart_code() -> None:
    chart, table = chunk(CHART_CHUNK), chunk(TABLE_CHUNK)
    assert chart and table
    assert {"runs", "weekly", "budgets"} == PAGES_WITHOUT_CHARTS
    for path in ("/", "/failures", "/run", "/app/under/a/base/overview", "/nosuch"):
        additions = head_additions(path)
        assert chart.encode() in additions and table.encode() in additions, path
    for path in ("/runs", "/weekly/", "/app/budgets"):
        assert chart.encode() not in head_additions(path), path
        assert table.encode() in head_additions(path), path


def test_a_chart_page_imports_the_chart_code_when_the_browser_is_idle() -> None:
    """By the address the client itself imports it from (so it is evaluated once), after the
    preload links; pages without charts never import it."""
    chart = chunk(CHART_CHUNK)
    for page in PAGES:
        additions = head_additions(f"/{page.name}")
        script = (f'<script type="module">const load=()=>import("./static/js/{chart}")'
                  ".catch(()=>{});").encode()
        assert (script in additions) is page.charts, page.name
        if page.charts:
            assert additions.index(script) > additions.index(b"modulepreload")
            assert b"requestIdleCallback(load)" in additions
            assert b"setTimeout(load,0)" in additions


def test_a_page_address_says_its_server_is_at_its_parent() -> None:
    """On `/attribution` Streamlit's client would first look for its server at
    `/attribution/_stcore/…`; the page says, before the client runs, that it is at the page's
    parent, relative to the page so that it holds under any mount point."""
    here = b'<script>window.__streamlit={BACKEND_BASE_URL:new URL(".",location.href).href}'
    above = b'<script>window.__streamlit={BACKEND_BASE_URL:new URL("..",location.href).href}'
    for path in ("/attribution", "/runs", "/overview", "/app/under/a/base/budgets"):
        assert head_additions(path).startswith(here), path
    assert head_additions("/weekly/").startswith(above)
    for path in ("/", "/nosuch", "/app/"):  # the root, or not a page: nothing said
        assert b"window.__streamlit" not in head_additions(path), path


def test_an_app_mounted_at_a_page_name_is_not_told_its_root_is_a_page() -> None:
    from streamlit import config

    before = config.get_option("server.baseUrlPath")
    config.set_option("server.baseUrlPath", "runs")
    try:
        for path in ("/runs", "/runs/"):
            assert b"window.__streamlit" not in head_additions(path), path
        assert b"window.__streamlit" in head_additions("/runs/attribution")
    finally:
        config.set_option("server.baseUrlPath", before)


def test_nothing_of_the_request_goes_into_the_page() -> None:
    """The additions depend on the page named by the path and nothing else: a path carrying
    markup is an unknown page and gets the default additions, unescaped nowhere."""
    hostile = "/<script>alert(1)</script>"
    assert head_additions(hostile) == head_additions("/nosuch")
    assert b"alert" not in head_additions(hostile)


def test_every_page_starts_its_sidebar_collapsed_in_a_narrow_window() -> None:
    """Streamlit collapses the sidebar at 768 px and below only: each page's head sets the
    client's own key when the user has chosen nothing (tests/browser/test_browser_narrow.py
    sees the effect at 900 and 1400 px)."""
    from dashboard.server.page_head import NARROW_PX, OURS_KEY, SIDEBAR_KEY

    for path in ("/", "/runs", "/weekly/", "/app/under/a/base/run"):
        additions = head_additions(path)
        assert f'k="{SIDEBAR_KEY}"'.encode() in additions, path
        assert f'm="{OURS_KEY}"'.encode() in additions, path
        assert f"innerWidth<{NARROW_PX}".encode() in additions, path
