"""`/budgets` on serve's OTLP/HTTP port: `budgetscope budgets` carried out by the server that
holds the database (docs/metrics.md §8, docs/guide.md#declaring-budgets).

- `GET /budgets`: every declaration, `{"declarations": [...]}`.
- `POST /budgets` with `Content-Type: application/json` and a change
  `{"action": "set"|"set_default"|"unset"|"unset_default"|"cap"|"uncap", "target": AGENT or
  STEP_KEY, "duration_ms": N}`: stored through the single writer; answered once the affected
  runs are re-derived (`"derived": true`) or after the wait gives up (`false`: still deriving).

Same bearer token as the exports. Only JSON is accepted on POST: a browser page on another
origin cannot send that content type without a CORS preflight, which this server never grants,
so a page a user happens to visit cannot change their budgets.

The logic is one function of the request, `handle(method, path, headers, body)` →
`(status, headers, body)`, so that any HTTP server can mount it (headers: a mapping whose
`get` is case-insensitive, as both http.server's and Tornado's are); the endpoint is also a
route entry of serve's OTLP/HTTP port (http_routes.Endpoint) with a small pool of its own.
A change holds its thread until its runs are re-measured (seconds for an agent of 10k runs):
in the exports' pool, 64 concurrent changes took every one of its 64 slots, and 17 of 31
OTLP exports sent meanwhile were answered 503. In its own pool, the changes beyond it are
answered 503 with Retry-After and ingest capacity is never spent on them.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from ingest.receivers.auth import BearerToken
from ingest.receivers.bounded_pool import BoundedPool
from ingest.receivers.http_routes import Head, Reply, Request
from store import Change, Closed, DeclarationError, DeclaredBudgets, WriterBusy

PATH = "/budgets"
JSON = "application/json"
# A change is a few hundred bytes; anything much larger is not one.
MAX_BODY_BYTES = 64 * 1024
# Changes are carried out one at a time by the single writer anyway; two threads let a list be
# answered beside a change, and a few more wait. Beyond that: 503 with Retry-After.
THREADS = 2
MOST_WAITING = 6
Response = tuple[int, dict[str, str], bytes]


class Headers(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...


def _answer(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> Response:
    body = (json.dumps(payload, ensure_ascii=True) + "\n").encode("utf-8")
    return status, {"Content-Type": JSON, **(headers or {})}, body


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _answer(status, {"error": message}, headers)


class DeclarationEndpoint:
    """A declaration's endpoint (/budgets, /prices): GET lists, POST carries out a change.
    Subclasses name their path, the pool's thread name, and how to list and to change."""

    methods = ("GET", "POST")
    exports = False  # never in the exports' pool, never counted against their requests
    otlp = False
    probe = False
    max_body_bytes = MAX_BODY_BYTES
    path = PATH
    thread_name = "budgetscope-budgets"
    # the errors of a bad change (400): nothing was stored
    refused: tuple[type[Exception], ...] = (DeclarationError,)

    def __init__(self, token: BearerToken) -> None:
        self.token = token
        self.pool = BoundedPool(THREADS, MOST_WAITING, self.thread_name)

    def listing(self) -> dict[str, Any]:
        raise NotImplementedError

    def change(self, payload: Any) -> dict[str, Any]:
        """Carry out the change `payload` describes; its outcome as JSON."""
        raise NotImplementedError

    def admit(self, head: Head) -> Reply | None:
        """The token before the body is read (the handler checks it again, for other hosts)."""
        if self.token.allows(head.headers.get("Authorization")):
            return None
        status, headers, body = _error(401, "missing or wrong bearer token",
                                       {"WWW-Authenticate": "Bearer"})
        return Reply(status, headers.pop("Content-Type"), body, headers, "unauthenticated")

    def respond(self, request: Request) -> Reply:
        head = request.head
        status, headers, body = self.handle(head.method, head.path, head.headers, request.body)
        headers = dict(headers)
        return Reply(status, headers.pop("Content-Type", JSON), body, headers)

    def handle(self, method: str, path: str, headers: Headers, body: bytes) -> Response:
        if path != self.path:
            return _error(404, f"no such endpoint {path!r}")
        if not self.token.allows(headers.get("Authorization")):
            return _error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        if method == "GET":
            return _answer(200, self.listing())
        if method != "POST":
            return _error(405, f"{method} is not allowed on {self.path}: GET or POST",
                          {"Allow": "GET, POST"})
        media_type = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if media_type != JSON:
            return _error(415, f"send the change as {JSON}, not {media_type or '(none)'!r}")
        if len(body) > MAX_BODY_BYTES:
            return _error(413, f"a change is at most {MAX_BODY_BYTES} bytes")
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            return _error(400, f"the body is not JSON: {error}")
        except RecursionError:  # 60,000 brackets fit in 64 KiB; a change is one level deep
            return _error(400, "the body is JSON nested too deeply to be a change")
        try:
            outcome = self.change(payload)
        except self.refused as error:
            return _error(400, str(error))
        except (Closed, WriterBusy) as error:
            return _error(503, str(error), {"Retry-After": "2"})
        except Exception as error:  # noqa: BLE001 - the database's own failure (disk full, ...)
            return _error(500, f"could not store the change: {str(error).splitlines()[0]}")
        return _answer(200, outcome)


class BudgetsEndpoint(DeclarationEndpoint):
    def __init__(self, service: DeclaredBudgets, token: BearerToken) -> None:
        super().__init__(token)
        self.service = service

    def listing(self) -> dict[str, Any]:
        return {"declarations": [d.to_json() for d in self.service.declarations()]}

    def change(self, payload: Any) -> dict[str, Any]:
        return self.service.apply(Change.from_json(payload)).to_json()
