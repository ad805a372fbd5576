"""Tell a first-time visitor's browser, in the page's own HTML, to fetch the chart code at once
and where Streamlit's server is.

Streamlit's frontend loads the JavaScript behind `st.plotly_chart` (one 4.7 MB chunk in 1.67) and
`st.dataframe` (486 KB) only when the first such element arrives over the websocket, that is
after the page's queries are done; a first visit then waits for the download and compile before
anything is drawn. A `<link rel="modulepreload">` in `<head>` starts both as the page loads, in
parallel with the websocket handshake and the script. Sent from the app's script instead (the
earlier way, `st.markdown` with raw HTML), the hint only took effect after the frontend had
itself loaded the chunk that renders raw HTML, half a second into the visit.

`PageHints` is ASGI middleware around Streamlit's app: it rewrites only the HTML page
Streamlit answers a page address with (GET, 200, `text/html`); everything else passes untouched.
A page that draws no charts (page_list.PAGES_WITHOUT_CHARTS) is not sent the chart chunk's hint:
on Runs that download held DOMContentLoaded back by about 100 ms for nothing.
The chunks' names are read from the installed Streamlit; when an upgrade renames them the
middleware finds the new names, or adds nothing.

A page that draws charts also imports the chart chunk as soon as the browser is idle
(evaluate_when_idle), so that evaluating plotly.js overlaps the server's queries instead of
following them.

A page's address also gets a one-line script saying the server is at the page's parent
(`window.__streamlit.BACKEND_BASE_URL`, the client's setting for where its server is): without
it the client tries `<page>/_stcore/health` first and connects about 130 ms later.
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Callable
from pathlib import Path

from dashboard.access import ASGIApp, Message, Receive, Scope, Send, is_page
from dashboard.page_list import PAGE_PATHS, PAGES_WITHOUT_CHARTS

# The frontend's lazily loaded chunks worth fetching before the page asks for them.
_CHART_CHUNK, _TABLE_CHUNK = "PlotlyChart.*.js", "DataFrame.*.js"
_CHUNK_PATTERNS = (_CHART_CHUNK, _TABLE_CHUNK)
# Headers of Streamlit's file answer that describe the file, not the rewritten page: a
# validator of the file would let a browser keep a page with other hints.
_DROPPED_HEADERS = frozenset({b"content-length", b"etag", b"last-modified"})


@functools.cache
def lazy_chunks(patterns: tuple[str, ...] = _CHUNK_PATTERNS) -> tuple[str, ...]:
    """The file names of the chunks named by `patterns` that this Streamlit build has."""
    import streamlit  # here, not at import: the CLI imports this module for every command

    static_js = Path(streamlit.__file__).resolve().parent / "static" / "static" / "js"
    names = []
    for pattern in patterns:
        found = sorted(static_js.glob(pattern))
        if len(found) == 1:
            names.append(found[0].name)
    return tuple(names)


@functools.cache
def preload_links(patterns: tuple[str, ...] = _CHUNK_PATTERNS) -> bytes:
    """`<link>` elements for lazy_chunks(patterns), relative to the page as Streamlit's own are
    (so they work under `server.baseUrlPath` and on any page address)."""
    return "".join(f'<link rel="modulepreload" crossorigin href="./static/js/'
                   f'{html.escape(name)}">' for name in lazy_chunks(patterns)).encode()


# Where Streamlit's client finds its server, said before the client's code runs (it reads
# `window.__streamlit` once, as it loads). Unsaid, on any address but the app's root the client
# first asks `<page>/_stcore/health`, gets a 404 and tries the parent about 130 ms later. The
# page's parent, relative to the page, is the app's base wherever it is mounted; the two forms
# differ only in a trailing slash. Constants: nothing from the request goes into the page.
_SERVER_IS_THE_PARENT = {
    False: b'<script>window.__streamlit={BACKEND_BASE_URL:new URL(".",location.href).href}'
           b'</script>',
    True: b'<script>window.__streamlit={BACKEND_BASE_URL:new URL("..",location.href).href}'
          b'</script>',
}


@functools.cache
def evaluate_when_idle(pattern: str = _CHART_CHUNK) -> bytes:
    """A module script that imports the chunk named by `pattern` once the browser is idle.

    The preload hint only fetches and parses the chart chunk: evaluating it (plotly.js, one
    main-thread task of 0.5 to 1.1 s on this project's test machines) waits until the first
    chart arrives, which is after the page's queries. While the server runs them the browser has
    nothing to do; importing the chunk then leaves only the drawing for when the charts arrive.
    Being one task, it also holds back the server's messages that arrive meanwhile, which is why
    it waits for idle rather than running at once (at once it slowed the client's start-up).
    Same address as Streamlit's own import, so the module is evaluated once; a failure here is
    left for that import to report."""
    names = lazy_chunks((pattern,))
    if not names:
        return b""
    address = json.dumps(f"./static/js/{names[0]}")
    return (f'<script type="module">const load=()=>import({address}).catch(()=>{{}});'
            "if(window.requestIdleCallback)requestIdleCallback(load);else setTimeout(load,0);"
            "</script>").encode()


def head_additions(path: str) -> bytes:
    """What goes into the head of the page at `path`: where the server is, on a page's address
    (not on the app's root, where the client looks there first anyway), the preload links, and
    the chart chunk's import when idle (evaluate_when_idle); a page that draws no charts gets
    neither the chart chunk's link nor its import. The page is the address's last
    segment (the app may live under a base path); any other address (an unknown page, which
    Streamlit answers with the default page) gets the links only, all of them."""
    page = path.rstrip("/").rsplit("/", 1)[-1]
    server = (_SERVER_IS_THE_PARENT[path.endswith("/")]
              if page in PAGE_PATHS and not _is_the_base(path) else b"")
    if page in PAGES_WITHOUT_CHARTS:
        return server + preload_links((_TABLE_CHUNK,))
    return server + preload_links() + evaluate_when_idle()


def _is_the_base(path: str) -> bool:
    """Whether `path` is Streamlit's own `server.baseUrlPath` (the root of an app mounted at,
    say, `/runs`), whose last segment only looks like a page."""
    from streamlit import config

    base = str(config.get_option("server.baseUrlPath") or "").strip("/")
    return bool(base) and path.strip("/") == base


def with_head_additions(page: bytes, additions: bytes) -> bytes:
    """`page` with `additions` just before `</head>` (unchanged when it has no `</head>`)."""
    head_end = page.find(b"</head>")
    if head_end < 0 or not additions:
        return page
    return page[:head_end] + additions + page[head_end:]


class PageHints:
    """ASGI middleware: adds `additions_for(path)` (head_additions) to the HTML Streamlit serves
    for a page address."""

    def __init__(self, app: ASGIApp,
                 additions_for: Callable[[str], bytes] = head_additions) -> None:
        self.app = app
        self.additions_for = additions_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "/")
        additions = (self.additions_for(path)
                     if scope["type"] == "http" and scope.get("method") == "GET" and is_page(path)
                     else b"")
        if not additions:
            await self.app(scope, receive, send)
            return
        # The page is ~10 KB; asking for it uncompressed keeps the rewrite a byte splice.
        scope = dict(scope)
        scope["headers"] = [(name, value) for name, value in scope.get("headers", [])
                            if name.lower() != b"accept-encoding"]
        await self.app(scope, receive, _Rewriter(send, additions).send)


class _Rewriter:
    """Holds back a 200 `text/html` answer until its body is complete, then sends it with the
    additions; any other answer (a 304, a redirect, a 404, a file) goes through as it comes."""

    def __init__(self, send: Send, additions: bytes) -> None:
        self._send = send
        self._additions = additions
        self._start: Message | None = None
        self._body: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            if message.get("status") == 200 and _is_plain_html(message.get("headers", [])):
                self._start = message
                return
        elif message["type"] == "http.response.body" and self._start is not None:
            self._body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            page = with_head_additions(b"".join(self._body), self._additions)
            headers = [(name, value) for name, value in self._start.get("headers", [])
                       if name.lower() not in _DROPPED_HEADERS]
            headers.append((b"content-length", str(len(page)).encode()))
            await self._send({**self._start, "headers": headers})
            await self._send({"type": "http.response.body", "body": page})
            self._start = None
            return
        await self._send(message)


def _is_plain_html(headers: list[tuple[bytes, bytes]]) -> bool:
    """HTML, and not compressed (a compressed body is passed on as it is, without links)."""
    named = {name.lower(): value.lower() for name, value in headers}
    return (named.get(b"content-type", b"").startswith(b"text/html")
            and named.get(b"content-encoding", b"identity") == b"identity")
