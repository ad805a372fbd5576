"""The Streamlit the dashboard is written for, and where it leans on more than Streamlit's
documented API.

The dashboard uses Streamlit's public API: `st.navigation`, `st.Page`, `st.query_params`,
`st.context` in the pages, and `st.App` (with its `middleware` and `lifespan` arguments and
`App.run(config=…)`) to serve them. What is not documented API is listed in `INTERNALS`, each
with where it is used, why, and what happens when an upgrade moves it;
tests/dashboard/test_streamlit_ground.py checks every entry against the installed Streamlit and
fails naming the entry and the series it was written for.

`SUPPORTED` is the series the code is tested with; pyproject.toml bounds Streamlit to the same
range (the test checks that too), uv.lock holds the exact release, and the dashboard refuses
to start on a Streamlit outside it (`require_supported`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

# The Streamlit series the dashboard is tested with: at least LOWEST, below HIGHEST.
LOWEST, HIGHEST = (1, 67), (1, 68)
SUPPORTED = f">={LOWEST[0]}.{LOWEST[1]},<{HIGHEST[0]}.{HIGHEST[1]}"


class UnsupportedStreamlit(RuntimeError):
    """The installed Streamlit is outside SUPPORTED."""


def _series(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or "x")
    except (IndexError, ValueError):
        return None


def refusal(version: str | None) -> str | None:
    """Why the dashboard does not start on Streamlit `version` (None: not installed), or
    None when the version is in SUPPORTED."""
    if version is None:
        return (f"the dashboard needs Streamlit {SUPPORTED}, which is not installed; "
                "`make install` installs the locked stack (uv.lock)")
    series = _series(version)
    if series is not None and LOWEST <= series < HIGHEST:
        return None
    return (f"the dashboard needs Streamlit {SUPPORTED} and this environment has {version}; "
            "`make install` installs the locked stack (uv.lock), or "
            f"`pip install 'streamlit{SUPPORTED}'`")


def require_supported() -> None:
    """Raise UnsupportedStreamlit, naming SUPPORTED, unless the installed Streamlit is in it."""
    try:
        version: str | None = metadata.version("streamlit")
    except metadata.PackageNotFoundError:
        version = None
    why = refusal(version)
    if why is not None:
        raise UnsupportedStreamlit(why)


@dataclass(frozen=True)
class Internal:
    """One thing of Streamlit's (or of the server it runs on) that is not its documented API."""

    what: str
    used_in: str
    why: str
    if_moved: str


INTERNALS: tuple[Internal, ...] = (
    Internal(
        what="the server's URL layout: /_stcore/health answers probes; /_stcore/, /static/, "
             "/media/, /component/ are Streamlit's own endpoints, every other path a page",
        used_in="dashboard/server/access.py (OPEN_PATHS, is_page)",
        why="the guard leaves the health probe open and shows its login page only on a page's "
            "address (Streamlit's endpoints get a plain 401)",
        if_moved="a renamed health path is refused 401 to probes that send no token; a new "
                 "endpoint prefix answers the login page instead of 401"),
    Internal(
        what="the websocket handshake's Origin check compares the Origin's host:port with the "
             "Host header byte for byte, and on a mismatch asks this machine's internal and "
             "external addresses by reaching out (a UDP socket to 8.8.8.8, "
             "checkip.amazonaws.com)",
        used_in="dashboard/server/access.py (AccessGuard hands Streamlit an Origin spelled as "
                "the Host, once it has compared the two itself)",
        why="an admitted same-origin browser whose Origin is spelled differently (LOCALHOST, "
            "an explicit :80) must not make the server call out",
        if_moved="nothing breaks if Streamlit compares properly; if it adds another lookup, "
                 "tests/dashboard/test_dashboard_outbound.py records the attempt"),
    Internal(
        what="the client's lazily loaded chunks: the code behind st.plotly_chart and "
             "st.dataframe is one file each in the package's static/static/js/, "
             "PlotlyChart.<hash>.js and DataFrame.<hash>.js, imported by that address",
        used_in="dashboard/server/page_head.py (CHART_CHUNK, TABLE_CHUNK)",
        why="a page's HTML preloads them, and imports the chart code when the browser is "
            "idle: without, a chart page's first visit took 1.03-1.28x as long, "
            "bench/README.md 'The page hints, removed and back'",
        if_moved="renamed or split, no hint is added and pages draw as without it; hinted by "
                 "another address than the client imports, the code would download twice"),
    Internal(
        what="the client reads where its server is from window.__streamlit.BACKEND_BASE_URL "
             "when set before it loads; unset, on a page's address it asks "
             "<page>/_stcore/health first",
        used_in="dashboard/server/page_head.py (_SERVER_IS_THE_PARENT)",
        why="without it every first visit opened at a page's address waits for two 404s "
            "and a retry, about 110 ms in Chromium here",
        if_moved="the client ignores the setting and retries as before (110 ms slower); "
                 "tests/browser/test_browser_dashboard.py sees the page-relative requests"),
    Internal(
        what="the client keeps the sidebar's collapsed state in localStorage under "
             "`stSidebarCollapsed-` (the app's page-link base, empty here) and reads it as it "
             "loads, before its own width rule",
        used_in="dashboard/server/page_head.py (_SIDEBAR_ON_NARROW_WINDOWS)",
        why="the sidebar starts collapsed below 1100 px (Streamlit's own rule: 768 px), so "
            "that a 900 px window keeps the pages' numbers and tables whole",
        if_moved="the sidebar starts open at 900 px again; tests/browser/test_browser_narrow.py "
                 "fails"),
    Internal(
        what="hidden config options logger.hideWelcomeMessage and runner.postScriptGC",
        used_in="dashboard/server/bootstrap.py (STREAMLIT_OPTIONS)",
        why="no start-up banner (its Network/External URL lines reach out on a wildcard "
            "--host); no full gc.collect(2) after every page run (it held the GIL ~0.3 s on "
            "1.4M-span pages, stalling serve's receivers)",
        if_moved="App.run refuses an unknown option: the dashboard does not start"),
    Internal(
        what="uvicorn (the server App.run runs on) handles SIGINT and SIGTERM itself and, "
             "once stopped, raises the signal again for the handler installed before it",
        used_in="dashboard/server/bootstrap.py (_Signals)",
        why="SIGTERM and Ctrl-C must return from the dashboard, so that `serve` drains its "
            "receivers and closes the database, instead of ending the process",
        if_moved="tests/server/test_serve.py (SIGTERM drains) fails"),
    Internal(
        what="uvicorn creates its listening server with loop.create_server(factory, sock=...) "
             "on the running event loop once the app's lifespan has started (the ASGI "
             "lifespan's startup comes before the server accepts), and calls only close() "
             "and wait_closed() on what it gets back",
        used_in="dashboard/server/connections.py (take_over, entered in bootstrap._lifespan)",
        why="uvicorn closes no connection that has not sent a request and caps none below "
            "the descriptor limit, and Python 3.11's asyncio accept loop spins at EMFILE: "
            "1,100 idle connections to the dashboard stopped serve's ingestion. The "
            "dashboard's own accept loop and connection guard take that call's place",
        if_moved="the dashboard is served unguarded again; "
                 "tests/dashboard/test_streamlit_ground.py and the dashboard flood of "
                 "tests/server/test_hostile_floods.py fail"),
)
