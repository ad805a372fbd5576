"""`POST /cli` on serve's OTLP/HTTP port: the read API through which `report`, `run`, `check`
and `simulate` work while `budgetscope serve` holds the file (README, "Running it in
production").

The request is `{"argv": ["report", "weekly", "--format", "csv"]}` with `Content-Type:
application/json` and the same bearer token as the exports and /metrics; the answer is
`{"status": EXIT_STATUS, "stdout": BASE64, "stderr": BASE64}`: the exact bytes the command
writes, so that the client prints what the command prints on the file. Which commands are
allowed, and how they run, is the runner's business (budgetscope/server/read_api.py);
this module is the HTTP side: token, media type, size, and a pool of its own with a bound,
so that a slow report never takes a thread of the exports or of the health checks.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any, Protocol

from ingest.receivers.auth import BearerToken
from ingest.receivers.bounded_pool import BoundedPool
from ingest.receivers.http_routes import JSON, Head, Reply, Request

PATH = "/cli"
MAX_BODY_BYTES = 64 * 1024
# Two commands at once (the machine's DuckDB threads are shared with the writer), and a few
# waiting; more are answered 503 with Retry-After.
THREADS = 2
MOST_WAITING = 8


class Result(Protocol):
    status: int
    stdout: bytes
    stderr: bytes


Runner = Callable[[Sequence[str]], Result]


def _json_reply(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None,
                message: str = "") -> Reply:
    body = (json.dumps(payload, ensure_ascii=True) + "\n").encode("utf-8")
    return Reply(status, JSON, body, dict(headers or {}), message)


def _error(status: HTTPStatus, message: str, headers: dict[str, str] | None = None) -> Reply:
    return _json_reply(int(status), {"error": message}, headers, message)


class CliEndpoint:
    methods = ("POST",)
    exports = False
    otlp = False
    max_body_bytes = MAX_BODY_BYTES

    def __init__(self, run: Runner, refused: type[Exception], token: BearerToken) -> None:
        """`run(argv)` runs one command; it raises `refused` for arguments it does not take."""
        self.run = run
        self.refused = refused
        self.token = token
        self.pool = BoundedPool(THREADS, MOST_WAITING, "budgetscope-read-api")

    def admit(self, head: Head) -> Reply | None:
        if not self.token.allows(head.headers.get("Authorization")):
            return _error(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token",
                          {"WWW-Authenticate": "Bearer"})
        if head.media_type != JSON:
            # Also why a page on another origin cannot call it: this content type needs a
            # CORS preflight, which the server never grants.
            return _error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                          f"send {JSON}, not {head.media_type or '(none)'!r}")
        return None

    def respond(self, request: Request) -> Reply:
        try:
            payload = json.loads(request.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            return _error(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {error}")
        except RecursionError:  # 60,000 brackets fit in 64 KiB; a call is two levels deep
            return _error(HTTPStatus.BAD_REQUEST,
                          'the body is JSON nested too deeply; send {"argv": [...]}')
        if not isinstance(payload, dict) or set(payload) != {"argv"}:
            return _error(HTTPStatus.BAD_REQUEST, 'the body is {"argv": [COMMAND, ARGUMENT...]}')
        try:
            result = self.run(payload["argv"])
        except self.refused as error:
            return _error(HTTPStatus.FORBIDDEN, str(error))
        return _json_reply(int(HTTPStatus.OK), {
            "status": result.status,
            "stdout": base64.b64encode(result.stdout).decode("ascii"),
            "stderr": base64.b64encode(result.stderr).decode("ascii")})
