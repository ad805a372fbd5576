"""The dashboard's answer to the CLI's requests sent to its port by mistake.

`budgetscope --server URL` and `budgetscope budgets` talk to serve's OTLP/HTTP port (`POST
/cli`, `/budgets`). Given the dashboard's address instead, Streamlit answered "405 Method Not
Allowed", which says nothing about the fix. This middleware answers those two paths (any
method) with a JSON error the CLI prints as the server's reason: inside `budgetscope serve`,
the address to give instead; on a standalone `budgetscope dashboard`, that no server runs
commands here. It runs inside the access guard, so only a client that may open the dashboard
learns where its receivers listen.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from dashboard import config
from dashboard.server.access import ASGIApp, Receive, Scope, Send

CLI_PATHS = ("/cli", "/budgets")
STATUS = 404


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
    """ASGI middleware: `/cli` and `/budgets` answered with `answer()` as JSON, status 404;
    everything else passes untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", "")).rstrip("/")
        if scope["type"] != "http" or not path.endswith(CLI_PATHS):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": answer()}).encode("utf-8")
        await send({"type": "http.response.start", "status": STATUS, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-content-type-options", b"nosniff")]})
        await send({"type": "http.response.body", "body": body})
