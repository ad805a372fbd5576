"""The dashboard on Streamlit's public ground (dashboard/server/ground.py): the installed Streamlit
is the series the code is written for, pyproject.toml bounds it to that series, the dashboard
refuses another one naming the range, and every Streamlit internal the dashboard still leans
on (ground.INTERNALS) is where it was. A failure here after an upgrade names the entry that
moved and the series it was written for: change the code that uses it, then the entry."""

from __future__ import annotations

import os
import signal
import threading
import time
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from dashboard.server import ground
from dashboard.server.bootstrap import STREAMLIT_OPTIONS
from tests.support.paths import REPO
from tests.support.ui import tiny_db

WRITTEN_FOR = f"written for Streamlit {ground.SUPPORTED}"


def _entry(start: str) -> ground.Internal:
    (entry,) = [entry for entry in ground.INTERNALS if entry.what.startswith(start)]
    return entry


def _moved(entry: ground.Internal, seen: str) -> str:
    return (f"a Streamlit internal moved ({WRITTEN_FOR}): {entry.what}; {seen}. Used in "
            f"{entry.used_in}; if moved: {entry.if_moved}")


def test_the_installed_streamlit_is_the_supported_series() -> None:
    ground.require_supported()


def test_pyproject_bounds_streamlit_to_the_supported_series() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (streamlit,) = [entry for entry in project["dependencies"]
                    if entry.startswith("streamlit")]
    assert streamlit.replace(" ", "") == f"streamlit{ground.SUPPORTED}"


@pytest.mark.parametrize("version", ["1.40.2", "1.66.1", "1.68.0", "2.0.0", "nonsense"])
def test_another_streamlit_is_refused_naming_the_range(version: str) -> None:
    why = ground.refusal(version)
    assert why is not None and ground.SUPPORTED in why and version in why


def test_the_supported_series_is_admitted() -> None:
    assert ground.refusal(f"{ground.LOWEST[0]}.{ground.LOWEST[1]}.0") is None
    assert ground.refusal(f"{ground.LOWEST[0]}.{ground.LOWEST[1]}.3rc1") is None
    assert ground.SUPPORTED in (ground.refusal(None) or "")


def test_the_dashboard_command_refuses_another_streamlit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before anything is served: the error names the supported range and the installed
    version, and the exit status is 1 (as for any other failure)."""
    db = tiny_db(tmp_path / "t.duckdb")
    monkeypatch.setattr(ground.metadata, "version", lambda name: "1.40.2")
    result = CliRunner().invoke(cli, ["--db", db, "dashboard", "--port", "1"])
    assert result.exit_code == 1, result.output
    assert f"needs Streamlit {ground.SUPPORTED} and this environment has 1.40.2" \
        in result.output


def test_every_internal_names_where_it_is_used() -> None:
    for entry in ground.INTERNALS:
        path = entry.used_in.split(" ", 1)[0]
        assert (REPO / path).exists(), entry.used_in


def test_the_url_layout_is_streamlits() -> None:
    from streamlit.web.server.starlette import starlette_routes as routes

    from dashboard.server.access import OPEN_PATHS, STREAMLIT_STREAM, is_page

    entry = _entry("the server's URL layout")
    seen = {name: getattr(routes, name, None) for name in (
        "BASE_ROUTE_CORE", "BASE_ROUTE_STATIC", "BASE_ROUTE_MEDIA", "BASE_ROUTE_COMPONENT")}
    assert seen == {"BASE_ROUTE_CORE": "_stcore", "BASE_ROUTE_STATIC": "static",
                    "BASE_ROUTE_MEDIA": "media", "BASE_ROUTE_COMPONENT": "component"}, \
        _moved(entry, f"its route prefixes are {seen}")
    assert "/_stcore/health" in OPEN_PATHS
    assert f"/{seen['BASE_ROUTE_CORE']}/stream" == STREAMLIT_STREAM
    assert not any(is_page(f"/{prefix}/x") for prefix in seen.values())


def test_the_websocket_origin_check_compares_spelling() -> None:
    """Streamlit admits a websocket whose Origin is spelled as its Host without asking this
    machine's addresses: what the guard hands it (access.origin_spelled_as_host)."""
    from dashboard.server.access import origin_spelled_as_host

    entry = _entry("the websocket handshake's Origin check")
    try:
        from streamlit.web.server.starlette.starlette_websocket import _is_origin_allowed
    except ImportError:
        pytest.fail(_moved(entry, "starlette_websocket._is_origin_allowed is gone"))
    scope = {"type": "websocket", "headers": [(b"host", b"dash.internal:8501"),
                                              (b"origin", b"http://DASH.internal:8501")]}
    spelled = origin_spelled_as_host(scope, {"host": ["dash.internal:8501"],
                                              "origin": ["http://DASH.internal:8501"]})
    origin = dict(spelled["headers"])[b"origin"].decode()
    assert origin == "http://dash.internal:8501"
    assert _is_origin_allowed(origin, "dash.internal:8501"), \
        _moved(entry, "an Origin spelled as the Host is no longer admitted as it is")


@pytest.mark.parametrize("pattern", ["PlotlyChart.*.js", "DataFrame.*.js"])
def test_the_chart_and_table_code_are_one_chunk_each_imported_by_name(pattern: str) -> None:
    """What page_head hints is the very file the client imports, so one download serves
    both; a renamed or split chunk would leave the pages without the hint."""
    from dashboard.server.page_head import CHART_CHUNK, TABLE_CHUNK, chunk, static_js

    assert pattern in (CHART_CHUNK, TABLE_CHUNK)
    entry = _entry("the client's lazily loaded chunks")
    found = sorted(path.name for path in static_js().glob(pattern))
    assert len(found) == 1, _moved(entry, f"{pattern} matches {found}")
    assert chunk(pattern) == found[0]
    imports = [path.name for path in static_js().glob("*.js")
               if f"import(`./{found[0]}`)".encode() in path.read_bytes()]
    assert imports, _moved(entry, f"no client code imports ./{found[0]} by that address")


def test_the_client_reads_its_server_from_window_streamlit() -> None:
    """What page_head sets before the client loads is a setting the installed client reads:
    window.__streamlit's BACKEND_BASE_URL (the browser test sees its effect; this names the
    series when an upgrade drops it)."""
    from dashboard.server.page_head import static_js

    entry = _entry("the client reads where its server is")
    readers = [path.name for path in static_js().glob("*.js")
               if b"window.__streamlit" in (code := path.read_bytes())
               and b"BACKEND_BASE_URL" in code]
    assert readers, _moved(entry, "no client code reads BACKEND_BASE_URL from "
                                  "window.__streamlit")


def test_the_client_keeps_the_sidebar_state_under_the_key_page_head_sets() -> None:
    """page_head starts the sidebar collapsed in a narrow window by the localStorage key the
    installed client reads (the browser test sees the effect; this names the series)."""
    from dashboard.server.page_head import SIDEBAR_KEY, static_js

    entry = _entry("the client keeps the sidebar's collapsed state")
    readers = [path.name for path in static_js().glob("*.js")
               if f"`{SIDEBAR_KEY}${{".encode() in (code := path.read_bytes())
               and b"localStorage.getItem" in code]
    assert readers, _moved(entry, f"no client code reads localStorage {SIDEBAR_KEY!r}")


@pytest.mark.parametrize("name", sorted(STREAMLIT_OPTIONS))
def test_every_option_the_dashboard_sets_exists(name: str) -> None:
    from streamlit import config

    entry = _entry("hidden config options")
    try:
        config.get_option(name)
    except RuntimeError as error:
        pytest.fail(_moved(entry, f"{name}: {error}"))


def test_uvicorn_creates_its_server_where_the_connection_guard_takes_it_over() -> None:
    """connections.take_over, entered in the app's lifespan, gets uvicorn's create_server call
    for the dashboard's socket: uvicorn then serves through the guard's Listener (a connection
    that sends nothing is closed after the head timeout, a request is answered)."""
    import asyncio
    import contextlib
    import socket

    import uvicorn

    from dashboard.server.connections import ConnectionLimits, Listener, take_over

    entry = _entry("uvicorn creates its listening server")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    seen: dict[str, object] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: object):  # type: ignore[no-untyped-def]
        with take_over(asyncio.get_running_loop(), port,
                       ConnectionLimits(head_seconds=0.5)) as taken:
            seen["taken"] = taken
            yield

    async def app(scope: dict, receive, send) -> None:  # type: ignore[no-untyped-def]
        if scope["type"] == "lifespan":
            from starlette.applications import Starlette

            await Starlette(lifespan=lifespan)(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    def probe() -> None:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as idle:
                idle.settimeout(10)
                started = time.monotonic()
                seen["idle"] = (idle.recv(1), time.monotonic() - started)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as asking:
                asking.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                seen["answer"] = asking.recv(4096)
        finally:
            server.should_exit = True

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    try:
        server.run(sockets=[sock])
    finally:
        prober.join(30)
        sock.close()
    taken = seen.get("taken")
    assert taken and isinstance(taken[0], Listener), \
        _moved(entry, "uvicorn created its server without calling the loop's create_server "
                      "with the socket")
    assert server.servers == taken, _moved(entry, f"uvicorn kept {server.servers}")
    data, waited = seen["idle"]  # type: ignore[misc]
    assert data == b"" and waited < 5, _moved(entry, f"an idle connection got {data!r} after "
                                                     f"{waited:.1f} s")
    assert seen["answer"].startswith(b"HTTP/1.1 200"), seen["answer"]  # type: ignore[union-attr]


def test_uvicorn_raises_the_signal_again_for_the_handler_before_it() -> None:
    """bootstrap._Signals relies on it: uvicorn stops on SIGTERM, then raises SIGTERM again for
    the handler that was installed before it ran, and returns."""
    import uvicorn

    entry = _entry("uvicorn (the server App.run runs on)")

    async def app(scope: dict, receive: object, send: object) -> None:
        return None

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off",
                                           log_level="warning"))
    handled: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: handled.append(signum))

    def terminate_once_started() -> None:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_once_started, daemon=True)
    killer.start()
    try:
        server.run()
    finally:
        signal.signal(signal.SIGTERM, before)
        killer.join(5)
    assert server.started
    assert handled == [signal.SIGTERM], _moved(entry, f"the handler before it saw {handled}")
