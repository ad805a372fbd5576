"""PageHints (dashboard/page_hints.py): the chart code's preload hints and where the server is go
into the HTML of a page address and nowhere else, and whatever it does not rewrite reaches the
browser as sent."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

import streamlit

from dashboard.access import Message, Receive, Scope, Send
from dashboard.page_hints import (
    PageHints,
    evaluate_when_idle,
    head_additions,
    lazy_chunks,
    preload_links,
)

PAGE = b"<!doctype html><html><head><title>Streamlit</title></head><body></body></html>"
LINKS = b'<link rel="modulepreload" crossorigin href="./static/js/PlotlyChart.x.js">'


def hinting(app: object) -> PageHints:
    """The middleware around `app`, with LINKS for every page."""
    return PageHints(app, lambda path: LINKS)  # type: ignore[arg-type]


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
    assert page == PAGE.replace(b"</head>", LINKS + b"</head>")
    assert int(headers(sent)[b"content-length"]) == len(page)
    # The file's validator would let a browser keep a copy with other hints.
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


def test_the_links_name_the_installed_streamlits_lazy_chunks() -> None:
    """If an upgrade renames or splits the chunks this fails, rather than the hint going
    silently missing."""
    static_js = Path(streamlit.__file__).resolve().parent / "static" / "static" / "js"
    chunks = lazy_chunks()
    assert [name.split(".")[0] for name in chunks] == ["PlotlyChart", "DataFrame"]
    for name in chunks:
        assert (static_js / name).is_file()
        assert f'href="./static/js/{name}"'.encode() in preload_links()


def test_a_page_that_draws_no_charts_is_not_sent_the_chart_chunk() -> None:
    chart, table = lazy_chunks()
    for path in ("/", "/failures", "/run", "/app/under/a/base/overview", "/nosuch"):
        additions = head_additions(path)
        assert chart.encode() in additions and table.encode() in additions, path
    for path in ("/runs", "/weekly/", "/app/budgets"):
        assert chart.encode() not in head_additions(path), path
        assert table.encode() in head_additions(path), path


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


def test_a_page_that_draws_charts_evaluates_the_chart_code_when_the_browser_is_idle() -> None:
    """The chart chunk is imported, by the address Streamlit itself imports it from, once the
    browser is idle (while the server runs the page's queries); pages without charts never
    import it."""
    chart, _ = lazy_chunks()
    script = evaluate_when_idle()
    assert script.startswith(b'<script type="module">') and script.endswith(b"</script>")
    assert f'import("./static/js/{chart}")'.encode() in script
    assert b"requestIdleCallback(load)" in script and b"setTimeout(load,0)" in script
    for path in ("/", "/attribution", "/run", "/nosuch"):
        assert head_additions(path).endswith(script), path
    for path in ("/runs", "/weekly", "/budgets"):
        assert b"import(" not in head_additions(path), path
