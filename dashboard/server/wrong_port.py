"""The dashboard's answer to the CLI's requests sent to its port by mistake.

`budgetscope --server URL`, `budgetscope budgets` and `budgetscope prices` talk to serve's
OTLP/HTTP port (`POST /cli`, `GET` and `POST /budgets` and `/prices`, asking for JSON). Given
the dashboard's address instead, Streamlit answered "405 Method Not Allowed", which says
nothing about the fix. This middleware answers those requests with a JSON error the CLI prints
as the server's reason (a browser's `GET /budgets` is the Budgets page, and passes): inside
`budgetscope serve`, the address to give instead; on a standalone `budgetscope dashboard`, that
no server runs commands here. It runs inside the access guard, so only a client that may open
the dashboard learns where its receivers listen.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from dashboard import config
from dashboard.server.access import ASGIApp, Receive, Scope, Send

CLI_PATH, BUDGETS_PATH, PRICES_PATH = "/cli", "/budgets", "/prices"
STATUS = 404


def is_a_cli_request(scope: Scope) -> bool:
    """A request of the CLI's: any to `/cli` or `/prices` (no page has either name), and to
    `/budgets` any but a GET that asks for a page (the Budgets page's address)."""
    path = str(scope.get("path", "")).rstrip("/")
    if scope["type"] != "http":
        return False
    if path.endswith((CLI_PATH, PRICES_PATH)):  # no page has either name
        return True
    if not path.endswith(BUDGETS_PATH):
        return False
    accept = b",".join(value for name, value in scope.get("headers", [])
                       if name.lower() == b"accept")
    return scope.get("method") != "GET" or b"text/html" not in accept


def answer() -> str:
    """Why the dashboard's port runs no command, and where to send it."""
    current = config.current()
    if current.editor is None:
        return ("this is the dashboard of `budgetscope dashboard`, which runs no commands: "
                "without --server the commands read the file themselves (--db), or go to the "
                "`budgetscope serve` holding it on their own")
    traces = urlsplit(current.endpoints[0])
    return (f"this is budgetscope serve's dashboard port; --server takes its OTLP/HTTP port: "
            f"{traces.scheme}://{traces.netloc}")


class WrongPort:
    """ASGI middleware: the CLI's requests (is_a_cli_request) answered with `answer()` as
    JSON, status 404; everything else passes untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_a_cli_request(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": answer()}).encode("utf-8")
        await send({"type": "http.response.start", "status": STATUS, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-content-type-options", b"nosniff")]})
        await send({"type": "http.response.body", "body": body})
