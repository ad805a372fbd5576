"""Who may open the dashboard: an ASGI layer in front of every route Streamlit serves (pages,
static files, `/_stcore/*` and the `/_stcore/stream` websocket).

1. **Host** (DNS rebinding). A page on `evil.example` whose name the attacker re-points at
   127.0.0.1 reaches a loopback dashboard from the victim's browser, with `Host:
   evil.example`. Only the names this dashboard is known by are answered: the loopback names,
   the `--host` it listens on (when not a wildcard), this machine's host name when it listens
   on a wildcard, and each `--allowed-host` (`*` turns the check off, e.g. behind a proxy
   that rewrites Host). Anything else gets 403 saying which option admits it.
2. **Origin**. A browser names the page behind every websocket and every cross-site POST; the
   origin must be this dashboard itself (scheme-less comparison of `host:port` with the Host
   header), so another site, or another local service on another port, cannot drive it.
   Requests without Origin (curl, scripts) are not browsers driven by someone else's page.
3. **Token** (with `--token`). As Jupyter does: open any dashboard URL once with `?token=…`
   (or submit the login page); the dashboard answers with a cookie and a redirect to the same
   URL without the token, so it leaves the address bar and the history. Every later request
   (page, static file, websocket) carries the cookie. The cookie holds an HMAC of the token,
   not the token, so a leaked cookie does not also open the OTLP ports. `Authorization:
   Bearer TOKEN` is accepted too, for scripts. Without it: the login page for a page request,
   401 for anything else, and a refused websocket handshake (403).

   A `?token=` is read only on a page a person opened: a top-level navigation
   (`Sec-Fetch-Mode: navigate`, `Sec-Fetch-Dest: document`) that no other site started
   (`Sec-Fetch-Site: none` or `same-origin`), or the login form. Another site's
   `<img src="…/?token=guess">` carries `Sec-Fetch-Dest: image` and `Sec-Fetch-Site:
   cross-site` (or `same-site`, from another port of this machine): its token is refused
   unread and uncounted (403). A client that sends no Sec-Fetch headers at all (curl, a script,
   a browser that does not send them to a plain-http address) is not told apart.
4. **Pace of wrong tokens** (the dashboard's own count, `TokenPace`: ingest/receivers/auth.py).
   A client address that sent ten wrong tokens (bearer, `?token=`, the login form) may be told
   "wrong" once each ten seconds; meanwhile its wrong tokens are answered 429 with Retry-After
   and not counted. The right token is always let through: an address is shared by everything
   on a machine, and someone else's guesses must not lock the owner out.

The guard answers its own open paths itself, to any Host and without the token: `/healthz` and
`/_stcore/health` say "ok" (200) while Streamlit's runtime is ready for browsers, else 503, as
Streamlit's own health route tells the guard through a request the guard makes up (no header,
no query of the client's). Nothing of the client's request reaches Streamlit unless its Host
is known and it carries the session or the token; an admitted browser's `/_stcore/health`
(which also sets Streamlit's XSRF cookie) is Streamlit's own answer.

The guard is `st.App` middleware (dashboard/server/bootstrap.py): it runs before Streamlit's
own middleware and routes. Streamlit's websocket check compares the Origin with the Host byte for
byte and, when they differ in spelling only (`LOCALHOST`, an explicit `:80`), asks this
machine's addresses by reaching out (dashboard/server/ground.py); the guard, which has compared
them properly, hands a websocket it admits on with its Origin spelled as its Host.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import ipaddress
import math
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOGIN_PATH = "/_budgetscope/login"
# Streamlit's health route (dashboard/server/ground.py, "the server's URL layout").
STREAMLIT_HEALTH = "/_stcore/health"
# The websocket a browser's session runs over (tests/dashboard/test_streamlit_ground.py checks the
# layout).
STREAMLIT_STREAM = "/_stcore/stream"
OPEN_PATHS = frozenset({STREAMLIT_HEALTH, "/healthz"})
# The Sec-Fetch-Site values of a request no other site started: typed, bookmarked, this page.
_OWN_SITES = frozenset({"none", "same-origin"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
# A login form is one short field; anything longer is not one.
MAX_LOGIN_BODY = 4096
COOKIE_MAX_AGE = 30 * 24 * 3600
_COOKIE_MESSAGE = b"budgetscope dashboard session v1"
# The login page loads nothing, runs nothing and cannot be framed.
_PAGE_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                "frame-ancestors 'none'; base-uri 'none'")


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(authority: str) -> str:
    """`Host` header (or an origin's netloc) without the port, lower-case, IPv6 unbracketed."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1:].split("]", 1)[0]
    if authority.count(":") == 1:
        return authority.split(":", 1)[0]
    return authority


@dataclass(frozen=True)
class AccessPolicy:
    """What the guard admits; built once at start-up from the command's options."""

    token: str | None
    allowed_hosts: frozenset[str]
    port: int
    any_host: bool = False
    # Wrong tokens per client (ingest.receivers.auth.FailedTokens, the dashboard's own count);
    # None: not counted.
    failed_tokens: TokenPace | None = field(default=None, compare=False)
    cookie_name: str = field(init=False)

    def __post_init__(self) -> None:
        # Cookies are not kept apart by port: two dashboards on one machine need two names.
        object.__setattr__(self, "cookie_name", f"budgetscope_session_{self.port}")

    @classmethod
    def build(cls, *, listen_host: str, port: int, token: str | None,
              extra_hosts: Iterable[str] = (),
              failed_tokens: TokenPace | None = None) -> AccessPolicy:
        extra = [host.strip().lower() for host in extra_hosts if host.strip()]
        hosts = set(LOOPBACK_NAMES)
        if listen_host.lower() in WILDCARDS:
            hosts.add(socket.gethostname().lower())  # local: no name lookup, nothing sent
        else:
            hosts.add(_host_name(listen_host) if listen_host.startswith("[")
                      else listen_host.lower())
        hosts.update(_host_name(host) if host.startswith("[") else host
                     for host in extra if host != "*")
        return cls(token=token, allowed_hosts=frozenset(hosts), port=port,
                   any_host="*" in extra, failed_tokens=failed_tokens)

    def host_allowed(self, host_header: str | None) -> bool:
        if self.any_host:
            return True
        if not host_header:
            return False
        name = _host_name(host_header)
        return name in self.allowed_hosts or is_loopback(name)

    def refusal(self, hosts: Sequence[str], origins: Sequence[str]) -> str | None:
        """Why a request with these `Host` and `Origin` headers is refused, or None: the one
        Host/Origin policy of every surface that shows or changes data (this dashboard, and
        in `serve` the OTLP/HTTP port's /cli, /budgets and /metrics, which are handed this
        object: ingest/receivers/host_check.py)."""
        if len(hosts) != 1 or not self.host_allowed(hosts[0]):
            shown = hosts[0] if hosts else "(none)"
            return (f"Host {shown!r} is not a name this server answers to (DNS rebinding "
                    "protection). If it is this machine's name, start the server with "
                    f"--allowed-host {_host_name(shown) if hosts else 'NAME'}.")
        if origins and not _same_origin(origins[0], hosts[0]):
            return (f"Origin {origins[0]!r} is not this server; requests driven by another "
                    "site's page are refused.")
        return None

    def session_value(self) -> str:
        assert self.token is not None
        return hmac.new(self.token.encode(), _COOKIE_MESSAGE, hashlib.sha256).hexdigest()

    def token_matches(self, offered: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(offered.encode("utf-8", "replace"), self.token.encode())

    def session_matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode("utf-8", "replace"),
                                   self.session_value().encode())


def _headers(scope: Scope) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in scope.get("headers", []):
        out.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return out


def _cookies(headers: dict[str, list[str]]) -> dict[str, str]:
    jar: dict[str, str] = {}
    for header in headers.get("cookie", []):
        for part in header.split(";"):
            name, sep, value = part.strip().partition("=")
            if sep:
                jar.setdefault(name, value)
    return jar


def _authority(value: str, default_port: str) -> tuple[str, str]:
    """(name, port) of a Host header or an origin's netloc."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") and rest[1:] else default_port
    if value.count(":") == 1:
        name, port = value.split(":")
        return name, port or default_port
    return value, default_port


def _same_origin(origin: str, host: str) -> bool:
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False  # includes "null": a sandboxed frame or a file
    default = "443" if parts.scheme == "https" else "80"
    return _authority(parts.netloc, default) == _authority(host, default)


def _safe_target(path: str, query: list[tuple[str, str]]) -> str:
    """A path of this server to send the browser back to, never another site: the decoded
    path is percent-encoded again (a browser drops tabs and line breaks from a URL and reads a
    backslash as a slash, so `/%09/evil.example/` used to land on evil.example as
    `//evil.example/`), and its leading slashes are one."""
    target = "/" + quote(path, safe=_PATH_SAFE).lstrip("/")
    return target + ("?" + urlencode(query) if query else "")


# RFC 3986 pchar and "/", less "%": a decoded path's own "%" is data, encoded again.
_PATH_SAFE = "/-._~!$&'()*+,;=:@"


class AccessGuard:
    """ASGI middleware: Host, Origin and token checks before `app` sees a request."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        headers = _headers(scope)
        path = scope.get("path", "/")
        if scope["type"] == "http" and path in OPEN_PATHS:
            if path == STREAMLIT_HEALTH and self._admitted(headers):
                await self.app(scope, receive, send)  # a signed-in browser: Streamlit's own
                return
            await self._health(scope, send)
            return
        refused = self.policy.refusal(headers.get("host", []), headers.get("origin", []))
        if refused is not None:
            await self._refuse(scope, receive, send, 403, refused)
            return
        if scope["type"] == "websocket":
            scope = origin_spelled_as_host(scope, headers)
        if self.policy.token is None or self._in_session(headers):
            await self.app(scope, receive, send)
            return
        bearer = _bearer(headers)
        if bearer is not None:
            verdict = self._judge(scope, bearer)
            if verdict == _RIGHT:
                await self.app(scope, receive, send)
                return
            if verdict == _PACED:
                await self._too_many(scope, receive, send)
                return
        if scope["type"] == "http":
            await self._login(scope, receive, send)
            return
        await self._refuse(scope, receive, send, 401, "token required")

    def _admitted(self, headers: dict[str, list[str]]) -> bool:
        """A known Host and same-origin browser, in session or with the right bearer token (a
        wrong one is not counted here: the open path is answered either way)."""
        if self.policy.refusal(headers.get("host", []), headers.get("origin", [])) is not None:
            return False
        if self.policy.token is None or self._in_session(headers):
            return True
        bearer = _bearer(headers)
        return bearer is not None and self.policy.token_matches(bearer)

    def _in_session(self, headers: dict[str, list[str]]) -> bool:
        session = _cookies(headers).get(self.policy.cookie_name)
        return session is not None and self.policy.session_matches(session)

    def _judge(self, scope: Scope, offered: str) -> str:
        """_RIGHT for the token, whoever else guessed from this address; else _WRONG (counted)
        or, for a client that sent too many wrong ones, _PACED (answered 429, not counted). A
        session cookie is no guess and never comes here."""
        if self.policy.token_matches(offered):
            return _RIGHT
        pace = self.policy.failed_tokens
        if pace is None:
            return _WRONG
        client = _client(scope)
        if pace.wait(client):
            return _PACED
        pace.failed(client)
        return _WRONG

    async def _too_many(self, scope: Scope, receive: Receive, send: Send) -> None:
        pace = self.policy.failed_tokens
        seconds = max(1, math.ceil(pace.wait(_client(scope)) if pace is not None else 1))
        if scope["type"] == "websocket":
            await self._refuse(scope, receive, send, 429, "too many wrong tokens")
            return
        await self._plain(send, 429, f"too many wrong tokens from this address; the next may "
                                     f"be tried in {seconds} s",
                          [(b"retry-after", str(seconds).encode())])

    async def _health(self, scope: Scope, send: Send) -> None:
        """An open path, answered here: "ok" while Streamlit's runtime is ready, as its health
        route says to a request made up here (nothing of the client's is passed on)."""
        if scope.get("method", "GET") not in ("GET", "HEAD"):
            await self._plain(send, 405, "use GET", [(b"allow", b"GET, HEAD")])
            return
        ready = await self._streamlit_ready(scope)
        body = b"ok" if ready else b"unavailable"
        await send({"type": "http.response.start", "status": 200 if ready else 503,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode()),
                                (b"cache-control", b"no-cache")]})
        await send({"type": "http.response.body",
                    "body": b"" if scope.get("method") == "HEAD" else body})

    async def _streamlit_ready(self, scope: Scope) -> bool:
        statuses: list[int] = []
        inner: Scope = {
            "type": "http", "asgi": scope.get("asgi", {"version": "3.0"}),
            "http_version": "1.1", "method": "GET", "scheme": scope.get("scheme", "http"),
            "path": STREAMLIT_HEALTH, "raw_path": STREAMLIT_HEALTH.encode(),
            "root_path": scope.get("root_path", ""), "query_string": b"",
            "headers": [(b"host", b"localhost")], "client": scope.get("client"),
            "server": scope.get("server")}
        if "state" in scope:
            inner["state"] = dict(scope["state"])

        async def nothing() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def status_of(message: Message) -> None:
            if message["type"] == "http.response.start":
                statuses.append(int(message["status"]))

        await self.app(inner, nothing, status_of)
        return statuses == [200]

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        method = scope.get("method", "GET")
        if method == "POST" and scope.get("path") == LOGIN_PATH:
            if not _opened_by_a_person(headers):
                await self._unread(send)
                return
            form = await self._form(receive)
            if form is None:
                await self._plain(send, 413, "login form too large")
                return
            target = form.get("next", "/")
            if not target.startswith("/"):
                target = "/"
            split = urlsplit(target)
            verdict = self._judge(scope, form.get("token", ""))
            if verdict == _RIGHT:
                # `next` holds a target _safe_target encoded: decoded first, not twice encoded.
                await self._welcome(send, _safe_target(unquote(split.path),
                                                       parse_qsl(split.query)))
            elif verdict == _PACED:
                await self._too_many(scope, receive, send)
            else:
                await self._page(send, 401, target, wrong=True)
            return
        offered = [value for name, value in query if name == "token"]
        rest = [(name, value) for name, value in query if name != "token"]
        if offered and method in ("GET", "HEAD"):
            if not _opened_by_a_person(headers):
                await self._unread(send)
                return
            verdict = self._judge(scope, offered[-1])
            if verdict == _RIGHT:
                await self._welcome(send, _safe_target(scope.get("path", "/"), rest))
            elif verdict == _PACED:
                await self._too_many(scope, receive, send)
            else:
                await self._page(send, 401, _safe_target(scope.get("path", "/"), rest),
                                 wrong=True)
            return
        if method == "GET" and is_page(scope.get("path", "/")):
            await self._page(send, 401, _safe_target(scope.get("path", "/"), rest), wrong=False)
            return
        await self._plain(send, 401, "token required: open the dashboard with ?token=TOKEN "
                                     "or send Authorization: Bearer TOKEN",
                          [(b"www-authenticate", b"Bearer")])

    async def _unread(self, send: Send) -> None:
        """A token another site's page sent (an image, a frame, a script): not compared, not
        counted."""
        await self._plain(send, 403, "a token is read only from an address you open yourself "
                                     "(typed, bookmarked, or a link on this dashboard), never "
                                     "from another site's page")

    async def _form(self, receive: Receive) -> dict[str, str] | None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_LOGIN_BODY:
                return None
            if not message.get("more_body", False):
                break
        return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))

    async def _welcome(self, send: Send, target: str) -> None:
        cookie = (f"{self.policy.cookie_name}={self.policy.session_value()}; Path=/; "
                  f"Max-Age={COOKIE_MAX_AGE}; HttpOnly; SameSite=Lax")
        await send({"type": "http.response.start", "status": 303, "headers": [
            (b"location", target.encode("latin-1", "replace")),
            (b"set-cookie", cookie.encode()), (b"cache-control", b"no-store"),
            (b"content-length", b"0"), (b"referrer-policy", b"no-referrer")]})
        await send({"type": "http.response.body", "body": b""})

    async def _page(self, send: Send, status: int, target: str, *, wrong: bool) -> None:
        message = ("That token is not this dashboard's." if wrong else
                   "This dashboard needs the token it was started with (--token or "
                   "BUDGETSCOPE_TOKEN).")
        body = _LOGIN_PAGE.format(message=html.escape(message), next=html.escape(target),
                                  action=LOGIN_PATH).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"content-security-policy", _PAGE_POLICY.encode()),
            # Not no-referrer: under it Chrome posts the form with `Origin: null`.
            (b"cache-control", b"no-store"), (b"referrer-policy", b"same-origin"),
            (b"x-content-type-options", b"nosniff")]})
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    async def _plain(send: Send, status: int, text: str,
                     extra: list[tuple[bytes, bytes]] | None = None) -> None:
        body = (text + "\n").encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store"),
            *(extra or [])]})
        await send({"type": "http.response.body", "body": body})

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int,
                      text: str) -> None:
        if scope["type"] == "websocket":
            # Closing before accepting makes the server answer the handshake with 403.
            await send({"type": "websocket.close", "code": 1008})
            return
        await self._plain(send, status, text)


class TokenPace(Protocol):
    """How often a client may try a token (ingest.receivers.auth.FailedTokens)."""

    def wait(self, client: str) -> float: ...

    def failed(self, client: str) -> None: ...


# What a token offered to the guard turned out to be (AccessGuard._judge).
_RIGHT, _WRONG, _PACED = "right", "wrong", "paced"


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


def origin_spelled_as_host(scope: Scope, headers: dict[str, list[str]]) -> Scope:
    """`scope` with its Origin header (already found the same origin as its Host) spelled as
    `scheme://` + the Host header, so that Streamlit's byte-for-byte comparison agrees."""
    origins, hosts = headers.get("origin", []), headers.get("host", [])
    if not origins or len(hosts) != 1:
        return scope
    spelled = f"{urlsplit(origins[0].strip()).scheme}://{hosts[0].strip()}"
    if spelled == origins[0]:
        return scope
    return {**scope, "headers": [(name, value) for name, value in scope.get("headers", [])
                                 if name.lower() != b"origin"]
            + [(b"origin", spelled.encode("latin-1"))]}


def _bearer(headers: dict[str, list[str]]) -> str | None:
    """The credentials of the first `Authorization: Bearer` header, if any."""
    for authorization in headers.get("authorization", []):
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            return credentials.strip()
    return None


def _opened_by_a_person(headers: dict[str, list[str]]) -> bool:
    """Whether the request is a page a person opened (Fetch Metadata, the Sec-Fetch-* headers
    every current browser sends to a trustworthy address, 127.0.0.1 and https among them): a
    top-level navigation to a document that no other site started. A request without any of
    the headers is not a browser that says so, and is not told apart."""
    site = _first(headers, "sec-fetch-site")
    mode = _first(headers, "sec-fetch-mode")
    dest = _first(headers, "sec-fetch-dest")
    return ((site is None or site in _OWN_SITES) and (mode is None or mode == "navigate")
            and (dest is None or dest == "document"))


def _first(headers: dict[str, list[str]], name: str) -> str | None:
    values = headers.get(name)
    return values[0].strip().lower() if values else None


def page_of(path: str) -> str:
    """The page a page address names: its last segment (the app may live under a base path)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def is_page(path: str) -> bool:
    """A path a person opens (the app's pages), not one of Streamlit's own endpoints."""
    return not path.startswith(("/_stcore/", "/static/", "/media/", "/component/",
                                "/_budgetscope/"))


_LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>budgetscope: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}}
input{{font-size:1rem;padding:.4rem;width:100%;box-sizing:border-box;margin:.5rem 0}}
button{{font-size:1rem;padding:.4rem 1rem}}</style></head>
<body><h1>budgetscope</h1><p id="message">{message}</p>
<form method="post" action="{action}">
<input type="hidden" name="next" value="{next}">
<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" autofocus>
<button type="submit">Open the dashboard</button></form></body></html>
"""
