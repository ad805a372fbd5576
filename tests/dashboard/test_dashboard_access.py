"""The dashboard behind the token, and behind Host and Origin checks, tried
with raw HTTP and websocket requests against `budgetscope dashboard` and `budgetscope serve`
as real processes on 127.0.0.1. The same in a real browser: tests/browser/test_browser_access.py.
"""

from __future__ import annotations

import asyncio
import http.client
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

from tests.support import ui
from tests.support.serve import CLI, environment_with_token, start_serve, stop
from tests.support.ui import TOKEN, tiny_db


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return tiny_db(tmp_path_factory.mktemp("access") / "tiny.duckdb")


@pytest.fixture(scope="module")
def guarded(db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ui.Dashboard]:
    app = ui.Dashboard(db, tmp_path_factory.mktemp("logs") / "guarded.log",
                            extra_args=("--token", TOKEN))
    yield app
    app.stop()


@pytest.fixture(scope="module")
def open_app(db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ui.Dashboard]:
    """No token, loopback only: Host and Origin are still checked."""
    app = ui.Dashboard(db, tmp_path_factory.mktemp("logs") / "open.log",
                            extra_args=("--allowed-host", "dash.internal"))
    yield app
    app.stop()


def get(port: int, path: str, headers: dict[str, str] | None = None,
        method: str = "GET", body: bytes | None = None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    response.read_body = response.read()  # type: ignore[attr-defined]
    connection.close()
    return response


def websocket(port: int, headers: dict[str, str], host: str | None = None) -> str:
    """'open', or the HTTP status the handshake was refused with. `host` is the Host header
    (the name in the URL) while the connection still goes to 127.0.0.1, as after rebinding."""
    async def attempt() -> str:
        try:
            async with websockets.connect(f"ws://{host or '127.0.0.1'}:{port}/_stcore/stream",
                                          host="127.0.0.1", port=port,
                                          additional_headers=headers,
                                          subprotocols=["streamlit"], open_timeout=30):
                return "open"
        except websockets.InvalidStatus as error:
            return str(error.response.status_code)

    return asyncio.run(attempt())


def session_cookie(app: ui.Dashboard) -> str:
    reply = get(app.port, f"/?token={TOKEN}")
    assert reply.status == 303
    cookie = reply.headers["set-cookie"].split(";")[0]
    assert cookie.startswith(f"budgetscope_session_{app.port}=")
    return cookie


def a_static_file(app: ui.Dashboard) -> str:
    index = get(app.port, "/", {"Authorization": f"Bearer {TOKEN}"})
    assert index.status == 200
    match = re.search(rb'src="\.?(/static/js/[^"]+\.js)"', index.read_body)  # type: ignore[attr-defined]
    assert match, index.read_body[:500]  # type: ignore[attr-defined]
    return match.group(1).decode()


def test_without_the_token_nothing_but_health_answers(guarded: ui.Dashboard) -> None:
    static = a_static_file(guarded)
    for path in ("/", "/attribution?range=all", static, "/_stcore/host-config",
                 "/_stcore/metrics", "/media/x.png", "/component/x/index.html",
                 "/_stcore/upload_file/x/y"):
        reply = get(guarded.port, path)
        assert reply.status == 401, (path, reply.status)
        assert TOKEN.encode() not in reply.read_body  # type: ignore[attr-defined]
    page = get(guarded.port, "/")
    assert b"needs the token" in page.read_body  # type: ignore[attr-defined]  # the login page
    assert page.headers["content-type"].startswith("text/html")
    assert get(guarded.port, "/_stcore/health").status == 200
    assert websocket(guarded.port, {}) == "403"
    assert websocket(guarded.port, {"Cookie": f"budgetscope_session_{guarded.port}=forged"}) \
        == "403"


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1", None])
@pytest.mark.parametrize("path", ["/healthz", "/_stcore/health"])
def test_the_guard_answers_its_open_paths_itself(guarded: ui.Dashboard, host: str | None,
                                                 path: str) -> None:
    """To any Host and without the token, "ok" and nothing else: /healthz used to be passed
    to Streamlit, whose catch-all answered the app's page to a foreign Host."""
    headers = {"Host": host} if host else {}
    reply = get(guarded.port, path, headers)
    assert (reply.status, reply.read_body) == (200, b"ok")  # type: ignore[attr-defined]
    assert reply.headers["content-type"].startswith("text/plain")
    assert "set-cookie" not in reply.headers
    assert get(guarded.port, path, headers, method="POST", body=b"x").status == 405
    query = get(guarded.port, f"{path}?token=wrong-000000000000&x=<script>", headers)
    assert (query.status, query.read_body) == (200, b"ok")  # type: ignore[attr-defined]


def test_a_signed_in_browser_gets_streamlits_own_health(guarded: ui.Dashboard) -> None:
    reply = get(guarded.port, "/_stcore/health", {"Cookie": session_cookie(guarded)})
    assert (reply.status, reply.read_body) == (200, b"ok")  # type: ignore[attr-defined]
    assert "_streamlit_xsrf" in reply.headers.get("set-cookie", "")


@pytest.mark.slow
def test_connections_must_send_a_head_in_time_and_websockets_may_idle(
        guarded: ui.Dashboard) -> None:
    """dashboard/server/connections.py: a connection that sends nothing is closed, one that
    sent half a head is answered 408 and closed, both within a few seconds of the head timeout;
    a signed-in websocket that sends nothing for longer stays open (it is the websocket's)."""
    import socket
    import time

    from dashboard.server.connections import HEAD_SECONDS

    cookie = session_cookie(guarded)
    idle = socket.create_connection(("127.0.0.1", guarded.port), timeout=30)
    half = socket.create_connection(("127.0.0.1", guarded.port), timeout=30)
    half.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    started = time.monotonic()

    async def quiet_websocket() -> bool:
        async with websockets.connect(f"ws://127.0.0.1:{guarded.port}/_stcore/stream",
                                      additional_headers={"Cookie": cookie},
                                      subprotocols=["streamlit"], open_timeout=30,
                                      ping_interval=None) as socket_:
            await asyncio.sleep(HEAD_SECONDS + 3)
            pong = await socket_.ping()
            await asyncio.wait_for(pong, 10)
            return True

    assert asyncio.run(quiet_websocket())
    assert idle.recv(64) == b""
    assert half.recv(64).startswith(b"HTTP/1.1 408")
    assert time.monotonic() - started < HEAD_SECONDS + 20
    idle.close()
    half.close()


# What a browser sends for an image another site's page loads, and for an address typed in.
CROSS_SITE_IMAGE = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors",
                    "Sec-Fetch-Dest": "image"}
TYPED = {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document",
         "Sec-Fetch-User": "?1"}


@pytest.mark.slow  # a dashboard process each
@pytest.mark.parametrize("fetch", [
    CROSS_SITE_IMAGE,
    {**CROSS_SITE_IMAGE, "Sec-Fetch-Site": "same-site"},  # a page on another local port
    {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
     "Sec-Fetch-Dest": "iframe"},
    {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"},
], ids=["cross-site image", "same-site image", "cross-site frame", "same-origin fetch"])
def test_a_token_another_page_sends_is_refused_unread(db: str, tmp_path: Path,
                                                      fetch: dict[str, str]) -> None:
    """Twelve guesses, none compared nor counted; then the owner, from the same address,
    typing the address with the right token, is let in (and so would be a guess of it sent
    by a page: 403 whatever the token)."""
    app = ui.Dashboard(db, tmp_path / "sec-fetch.log", extra_args=("--token", TOKEN))
    try:
        answers = [get(app.port, f"/?token=guess-{n:012d}", fetch).status for n in range(12)]
        assert answers == [403] * 12
        assert get(app.port, f"/?token={TOKEN}", fetch).status == 403
        owner = get(app.port, f"/?token={TOKEN}", TYPED)
        assert owner.status == 303 and owner.headers["location"] == "/"
        # Not counted: the address is told "wrong" as after no guess at all (401, not 429).
        assert get(app.port, "/?token=typo-000000000000", TYPED).status == 401
    finally:
        app.stop()


def test_token_in_the_url_leaves_a_cookie_and_leaves_the_url(guarded: ui.Dashboard) -> None:
    reply = get(guarded.port, f"/attribution?range=all&token={TOKEN}&agent=a")
    assert reply.status == 303
    assert reply.headers["location"] == "/attribution?range=all&agent=a"
    set_cookie = reply.headers["set-cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Lax" in set_cookie
    assert TOKEN not in set_cookie  # an HMAC of the token, not the token
    cookie = set_cookie.split(";")[0]
    assert get(guarded.port, "/", {"Cookie": cookie}).status == 200
    assert get(guarded.port, a_static_file(guarded), {"Cookie": cookie}).status == 200
    assert websocket(guarded.port, {"Cookie": cookie}) == "open"
    assert websocket(guarded.port, {"Authorization": f"Bearer {TOKEN}"}) == "open"
    # A wrong token gets the login page again, and no cookie.
    wrong = get(guarded.port, "/?token=nope")
    assert wrong.status == 401 and "set-cookie" not in wrong.headers
    # Never an open redirect to another site.
    assert get(guarded.port, f"//evil.example/?token={TOKEN}").headers["location"] \
        .startswith("/evil.example")


def test_the_login_form(guarded: ui.Dashboard) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded",
            "Origin": f"http://127.0.0.1:{guarded.port}"}
    ok = get(guarded.port, "/_budgetscope/login", form, "POST",
             f"token={TOKEN}&next=/failures%3Frange%3Dall".encode())
    assert ok.status == 303 and ok.headers["location"] == "/failures?range=all"
    assert ok.headers["set-cookie"].startswith(f"budgetscope_session_{guarded.port}=")
    wrong = get(guarded.port, "/_budgetscope/login", form, "POST", b"token=nope&next=/")
    assert wrong.status == 401 and b"That token is not this dashboard" in wrong.read_body  # type: ignore[attr-defined]
    away = get(guarded.port, "/_budgetscope/login", form, "POST",
               f"token={TOKEN}&next=https://evil.example/".encode())
    assert away.headers["location"] == "/"
    # A form posted from another site's page (login CSRF) is refused.
    forged = get(guarded.port, "/_budgetscope/login",
                 {**form, "Origin": "http://evil.example"}, "POST", f"token={TOKEN}".encode())
    assert forged.status == 403


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8501", "10.0.0.7",
                                  "127.0.0.1.evil.example"])
def test_a_rebound_host_name_is_refused(open_app: ui.Dashboard, host: str) -> None:
    """DNS rebinding: the attacker's name, resolved to 127.0.0.1, reaches the port."""
    reply = get(open_app.port, "/", {"Host": host})
    assert reply.status == 403
    assert b"--allowed-host" in reply.read_body  # type: ignore[attr-defined]
    assert websocket(open_app.port, {}, host=host.split(":")[0]) == "403"


def test_known_host_names_are_answered(open_app: ui.Dashboard) -> None:
    port = open_app.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"dash.internal:{port}",
                 f"DASH.internal:{port}"):
        assert get(port, "/", {"Host": host}).status == 200, host
    assert websocket(port, {}) == "open"
    assert websocket(port, {}, host="dash.internal") == "open"


def test_a_websocket_opened_by_another_site_is_refused(open_app: ui.Dashboard) -> None:
    port = open_app.port
    for origin in ("http://evil.example", f"http://localhost:{port + 1}", "null",
                   f"http://127.0.0.1:{port}.evil.example", "file://"):
        assert websocket(port, {"Origin": origin}) == "403", origin
    assert websocket(port, {"Origin": f"http://127.0.0.1:{port}"}) == "open"
    assert get(port, "/", {"Origin": "http://evil.example"}).status == 403


@pytest.mark.slow
def test_serve_guards_its_dashboard_too(db: str, tmp_path: Path) -> None:
    copy = tmp_path / "serve.duckdb"
    copy.write_bytes(Path(db).read_bytes())
    port = ui.free_port()
    process, _ = start_serve(copy, "--ui-port", str(port), token=TOKEN)
    try:
        import time
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if get(port, "/_stcore/health").status == 200:
                    break
            except OSError:
                time.sleep(0.3)
        assert get(port, "/").status == 401
        assert websocket(port, {}) == "403"
        reply = get(port, f"/?token={TOKEN}")
        assert reply.status == 303
        cookie = reply.headers["set-cookie"].split(";")[0]
        assert get(port, "/", {"Cookie": cookie}).status == 200
        assert websocket(port, {"Cookie": cookie}) == "open"
        assert get(port, "/", {"Cookie": cookie, "Host": "evil.example"}).status == 403
    finally:
        code, out, err = stop(process)
    assert code == 0, err


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["serve", "--no-ui", "--otlp-http-port", "0", "--otlp-grpc-port", "0"],
    ["dashboard", "--port", "8599"],
])
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_no_token_beyond_loopback_is_refused(tmp_path: Path, command: list[str],
                                             host: str) -> None:
    db = tiny_db(tmp_path / "t.duckdb")
    try:
        result = subprocess.run([*CLI, "--db", db, *command, "--host", host],
                                capture_output=True, text=True,
                                env=environment_with_token(None), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command} on {host} started with no token")
    assert result.returncode == 2, result.stderr
    assert "--insecure-no-auth" in result.stderr and "--token" in result.stderr
