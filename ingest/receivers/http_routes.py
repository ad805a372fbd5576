"""What an endpoint on the OTLP/HTTP port is: the route table's entries (path → Endpoint).

The port (http_receiver.py and the http_*.py modules beside it) owns the framing, the limits
and the threads; an endpoint only says which methods it takes, may refuse a request from its
head alone (`admit`, on the event loop: quick, before the body is read), and answers the whole
request (`respond`, in a worker thread: it may decode and wait for a commit). Adding an
endpoint is one entry in the table.

An endpoint whose `streams` is true may write its answer as it makes it, through the request's
`stream` (AnswerStream: start, then write pieces; a write waits while the client has not
taken the previous pieces), and then return `streamed()`: what it holds is a few pieces, whatever
the answer's size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Protocol

from ingest.receivers.bounded_pool import BoundedPool
from ingest.receivers.status import status_json, status_protobuf

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


@dataclass(frozen=True)
class Head:
    """A request as known before its body: method, path, query, headers, peer address."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]  # case-insensitive (tornado's HTTPHeaders)
    peer: str

    @property
    def media_type(self) -> str:
        return (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()

    @property
    def answer_type(self) -> str:
        """Errors are answered in the request's own encoding: protobuf, else JSON."""
        return PROTOBUF if self.media_type == PROTOBUF else JSON


class ClientGone(ConnectionError):
    """The client of a streamed answer went away, or took nothing for too long."""


class AnswerStream(Protocol):
    """An answer written as it is made, from the endpoint's worker thread."""

    def start(self, status: int, content_type: str, headers: dict[str, str]) -> None:
        """The answer's head (its body is sent in chunks, as it is written)."""

    def write(self, data: bytes) -> None:
        """A piece of the body; waits while earlier pieces are still on their way to the
        client. Raises ClientGone when the client left or took nothing for too long."""


@dataclass(frozen=True)
class Request:
    head: Head
    body: bytes
    # For an endpoint whose `streams` is true; None for the others.
    stream: AnswerStream | None = None


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    # For the log line of a refused request (counters.refused); empty for a success.
    message: str = ""
    # The answer was written through Request.stream; only its end is left to the server.
    streamed: bool = False


def streamed() -> Reply:
    """What `respond` returns once it has written its answer through the stream."""
    return Reply(200, "", b"", streamed=True)


def status_reply(head: Head, status: HTTPStatus, code: int, message: str,
                 headers: dict[str, str] | None = None,
                 retry_after: int | None = None) -> Reply:
    """An error answered with a google.rpc.Status in the request's encoding (OTLP/HTTP);
    back-pressure carries Retry-After and a RetryInfo detail with the same delay."""
    headers = dict(headers or {})
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    if head.answer_type == PROTOBUF:
        body = status_protobuf(code, message, retry_after)
    else:
        body = status_json(code, message, retry_after)
    return Reply(int(status), head.answer_type, body, headers, message)


class Endpoint(Protocol):
    methods: tuple[str, ...]
    # Answered in the pool of export threads, within Limits.max_requests (True), or in the
    # small pool of operator pages (False), so that exports waiting for commits never delay a
    # health check.
    exports: bool
    # An OTLP export: its refusals are counted (budgetscope_requests_refused_total) and 404s
    # name it as where exports go.
    otlp: bool
    # A probe (serve's /healthz, /readyz): answers any Host and is never paced for wrong
    # tokens, since probes send neither the token nor the public name (host_check.py). It must
    # say nothing about the data.
    probe: bool
    # Largest body it takes (None: the receiver's --max-body-bytes).
    max_body_bytes: int | None
    # Its own bounded pool (the read API, /budgets: slow calls wait there, never in the pools
    # of exports or pages), or None for the pool `exports` picks.
    pool: BoundedPool | None

    def admit(self, head: Head) -> Reply | None:
        """A refusal from the head alone (no token, wrong content type…), else None."""

    def respond(self, request: Request) -> Reply:
        """The answer to a whole request; runs in a worker thread."""

