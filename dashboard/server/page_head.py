"""What a first-time visitor's browser is told in the page's own HTML: where Streamlit's server
is, and to fetch the chart and table code at once instead of when the first chart arrives.

Three additions to `<head>`, on a page's address only (and a fourth, below):
- where the server is (`window.__streamlit.BACKEND_BASE_URL`, the client's setting for it,
  read once as it loads): the page's parent, relative to the page, which is the app's base
  wherever it is mounted. Unsaid, on any address but the app's root the client first asks
  `<page>/_stcore/health` and `<page>/_stcore/host-config`, gets two 404s and tries the parent
  about 110 ms later (measured in Chromium on this project's machine), on every first visit
  opened from a link to a page;
- a `<link rel="modulepreload">` for each of the chart and table chunks. Streamlit's client
  loads the JavaScript behind `st.plotly_chart` (one 4.7 MB chunk in 1.67) and `st.dataframe`
  (486 KB) only when the first such element arrives over the websocket, after the page's
  queries; the links start both downloads with the client's own. A page that draws no charts
  (page_list.PAGES_WITHOUT_CHARTS) is not sent the chart chunk's (on Runs that download held
  the page's load back by about 100 ms for nothing);
- on a page that draws charts, a module script that imports the chart chunk once the browser
  is idle, so that evaluating plotly.js (one main-thread task of 0.5–1.1 s on this project's
  machines) overlaps the server's queries instead of following them. Idle, not at once:
  evaluation is one long task, and at once it delayed the client's own start-up. Same address
  as Streamlit's own import, so the module is evaluated once; a failure here is left for that
  import to report.
Without them, first visits took 1.05–1.28× as long (bench/README.md, "The page hints, removed
and back").

And, on every page, a script that starts the sidebar collapsed in a window narrower than
NARROW_PX: Streamlit's own "auto" collapses it only at 768 px and below, and at 900 px the open
sidebar left the pages' numbers and tables too little room. The client keeps the sidebar's
state in localStorage (`stSidebarCollapsed-`, a choice the user made by clicking) and reads it
as it loads; the script sets it when nothing the user chose is there, marks that it did, and
takes its own setting back in a wider window.

The client's setting and the chunks' file names (which change with every Streamlit release,
and are read from the installed package) are Streamlit internals, listed in ground.INTERNALS.
When an upgrade renames or splits a chunk, its hint is left out and pages draw as they would
without; tests/dashboard/test_streamlit_ground.py fails naming the entry. Nothing from the request
goes into the page: the additions are constants chosen by the page's name.

`PageHead` is `st.App` middleware inside the access guard: it rewrites only the HTML Streamlit
answers a page address with (GET, 200, uncompressed `text/html`); everything else passes
untouched.
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Callable
from pathlib import Path

from dashboard.page_list import PAGE_PATHS, PAGES_WITHOUT_CHARTS
from dashboard.server.access import ASGIApp, Message, Receive, Scope, Send, is_page, page_of

# The client's lazily loaded chunks worth fetching before the page asks for them, as globs in
# the installed Streamlit's static/static/js/.
CHART_CHUNK, TABLE_CHUNK = "PlotlyChart.*.js", "DataFrame.*.js"
# Headers of Streamlit's file answer that describe the file, not the rewritten page: a
# validator of the file would let a browser keep a page with other additions.
_DROPPED_HEADERS = frozenset({b"content-length", b"etag", b"last-modified"})


def static_js() -> Path:
    import streamlit  # here, not at import: the CLI imports the server package for every command

    return Path(streamlit.__file__).resolve().parent / "static" / "static" / "js"


@functools.cache
def chunk(pattern: str) -> str | None:
    """The file name of the one chunk `pattern` names in this Streamlit build; None when there
    is none or several (an upgrade moved it: better no hint than a wrong one)."""
    found = sorted(static_js().glob(pattern))
    return found[0].name if len(found) == 1 else None


def _link(name: str | None) -> str:
    # Relative to the page, as Streamlit's own links are: right under `server.baseUrlPath` and
    # on any page address. The name is a file of the installed package, escaped all the same.
    return ("" if name is None else
            f'<link rel="modulepreload" crossorigin href="./static/js/{html.escape(name)}">')


def _import_when_idle(name: str | None) -> str:
    if name is None:
        return ""
    address = json.dumps(f"./static/js/{name}")
    return (f'<script type="module">const load=()=>import({address}).catch(()=>{{}});'
            "if(window.requestIdleCallback)requestIdleCallback(load);else setTimeout(load,0);"
            "</script>")


# The client's server is the page's parent: "." from `/app/runs`, ".." from `/app/runs/`.
_SERVER_IS_THE_PARENT = {
    False: '<script>window.__streamlit={BACKEND_BASE_URL:new URL(".",location.href).href}'
           '</script>',
    True: '<script>window.__streamlit={BACKEND_BASE_URL:new URL("..",location.href).href}'
          '</script>',
}


# Below this window width the sidebar starts collapsed (the headline tiles wrap below ~1100 px
# anyway; a collapsed sidebar gives the page back its ~300 px).
NARROW_PX = 1100
# The client's localStorage key for the sidebar's state (ground.INTERNALS), and ours marking a
# value this script set rather than the user.
SIDEBAR_KEY, OURS_KEY = "stSidebarCollapsed-", "budgetscope.sidebarCollapsedForNarrow"
_SIDEBAR_ON_NARROW_WINDOWS = (
    "<script>(()=>{try{const s=localStorage,k=" + json.dumps(SIDEBAR_KEY) + ",m="
    + json.dumps(OURS_KEY) + ",v=s.getItem(k);"
    "if(v===null||v===s.getItem(m)){if(innerWidth<" + str(NARROW_PX) + "){s.setItem(k,'true');"
    "s.setItem(m,'true')}else{s.removeItem(k);s.removeItem(m)}}}catch(e){}})()</script>")


def head_additions(path: str) -> bytes:
    """What goes into the head of the page at `path` (not cached: paths come from clients).
    The page is the address's last segment (the app may live under a base path). A page's
    address says where the server is (the app's root needs not: the client looks there
    first); an address that names no page without charts (the root, a chart page, an unknown
    page Streamlit answers with the default one) gets both chunks' links and the idle import,
    a page without charts only the table chunk's link."""
    page = page_of(path)
    server = (_SERVER_IS_THE_PARENT[path.endswith("/")]
              if page in PAGE_PATHS and not _is_the_base(path) else "")
    server += _SIDEBAR_ON_NARROW_WINDOWS
    table = _link(chunk(TABLE_CHUNK))
    if page in PAGES_WITHOUT_CHARTS:
        return (server + table).encode()
    chart = chunk(CHART_CHUNK)
    return (server + _link(chart) + table + _import_when_idle(chart)).encode()


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


class PageHead:
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
        # The page is ~10 KB; asked for uncompressed, the rewrite is a splice of plain bytes.
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
    """HTML, and not compressed (a compressed body is passed on as it is, without additions)."""
    named = {name.lower(): value.lower() for name, value in headers}
    return (named.get(b"content-type", b"").startswith(b"text/html")
            and named.get(b"content-encoding", b"identity") == b"identity")
