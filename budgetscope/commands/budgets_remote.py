"""`budgetscope budgets` and `budgetscope prices` sent to the `budgetscope serve` that holds the
database: its /budgets and /prices endpoints (budgetscope/server/budgets_endpoint.py,
prices_endpoint.py), found in the sidecar the server announces itself in (store/file/owner.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import click

from budgetscope.commands.http_client import unauthorised, urlopen
from store import Change, PriceChange

# A change waits on the server for its runs to be re-derived (up to 60 s there).
TIMEOUT_SECONDS = 90.0


class RemoteError(RuntimeError):
    """The server refused or could not be reached; `usage` when the request itself was bad."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


def _request(url: str, token: str | None, body: bytes | None) -> dict[str, Any]:
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body, headers=headers,
                                     method="POST" if body is not None else "GET")
    try:
        with urlopen(request, timeout=TIMEOUT_SECONDS) as answer:
            return json.loads(answer.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        try:
            message = json.loads(error.read().decode("utf-8")).get("error") or error.reason
        except (ValueError, AttributeError, RecursionError):
            message = error.reason
        if error.code == 401:
            raise RemoteError(unauthorised(url, token)) from None
        raise RemoteError(f"the server refused: {message}", usage=error.code == 400) from None
    except (urllib.error.URLError, OSError, ValueError, RecursionError) as error:
        reason = getattr(error, "reason", error)
        raise RemoteError(f"cannot reach the server at {url}: {reason}") from None


def endpoint_url(server: str, path: str) -> str:
    """`path` (/budgets, /prices) of the server at `server` (--server: http://HOST:PORT of its
    OTLP/HTTP port)."""
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(f"{server!r} is not an http:// or https:// URL of the "
                                 "server's OTLP/HTTP port, e.g. http://127.0.0.1:4318",
                                 param_hint="--server")
    return server.rstrip("/") + path


def send_change(url: str, token: str | None, change: Change | PriceChange) -> dict[str, Any]:
    return _request(url, token, json.dumps(change.to_json()).encode("utf-8"))


def fetch_declarations(url: str, token: str | None) -> list[dict[str, Any]]:
    return list(_request(url, token, None).get("declarations", []))


def fetch_prices(url: str, token: str | None) -> dict[str, Any]:
    """The server's /prices: the prices set, the bundled table, the models without a price."""
    return _request(url, token, None)
