"""The dashboard's port answers the CLI's requests sent to it by mistake with where to send
them (dashboard/server/wrong_port.py), and leaves a browser's pages alone: its Budgets page is
at /budgets, which the CLI's `budgets list` asks for as JSON on serve's OTLP/HTTP port."""

from __future__ import annotations

import pytest

from dashboard.server.access import STREAMLIT_STREAM
from dashboard.server.wrong_port import is_a_cli_request


def scope(method: str, path: str, accept: str | None = None) -> dict:
    headers = [] if accept is None else [(b"accept", accept.encode())]
    return {"type": "http", "method": method, "path": path, "headers": headers}


@pytest.mark.parametrize(("request_scope", "cli"), [
    (scope("POST", "/cli", "application/json"), True),
    (scope("GET", "/cli"), True),
    (scope("POST", "/budgets", "application/json"), True),
    (scope("GET", "/budgets", "application/json"), True),  # budgets list
    (scope("POST", "/prices", "application/json"), True),  # prices set
    (scope("GET", "/prices"), True),  # prices list: no page has the name
    (scope("GET", "/budgets", "text/html,application/xhtml+xml,*/*;q=0.8"), False),  # the page
    (scope("GET", "/app/budgets/", "text/html"), False),  # under a base path
    (scope("GET", "/runs", "application/json"), False),
    ({"type": "websocket", "path": STREAMLIT_STREAM, "headers": []}, False),
])
def test_only_the_clis_requests_are_answered(request_scope: dict, cli: bool) -> None:
    assert is_a_cli_request(request_scope) is cli
