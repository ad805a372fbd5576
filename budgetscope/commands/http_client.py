"""How the CLI asks a server (the read API, /budgets): urllib, following a redirect only within
the origin it asked (scheme, host and port), so that the bearer token it sends is never sent
to another host. urllib follows a 301, 302 or 303 to anywhere with every header the request
carried, `Authorization` included: a server, or anything in front of it, answering a
redirect to another host would have received the token there."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


class CrossOriginRedirect(urllib.error.URLError):
    """The server redirected to another origin: not followed."""


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        if _origin(newurl) != _origin(req.full_url):
            raise CrossOriginRedirect(f"it answered a redirect to {newurl}, another origin, "
                                      "which is not followed so that the token is not sent "
                                      "there; give --server the address that answers itself")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameOriginRedirects)


def urlopen(request: urllib.request.Request, timeout: float) -> Any:
    """urllib.request.urlopen, with redirects followed only within the origin asked."""
    return _OPENER.open(request, timeout=timeout)


def unauthorised(url: str, token: str | None) -> str:
    """What a 401 from the server at `url` means to the person who ran the command: a token
    that was sent and rejected is not a missing one."""
    if token:
        return (f"the server at {url} rejected the token given (--token or BUDGETSCOPE_TOKEN): "
                "it is not the one that server was started with")
    return (f"the server at {url} requires its bearer token: pass --token (before the "
            "command) or set BUDGETSCOPE_TOKEN")
