"""What the OTLP/HTTP port decides from a request's head alone, before reading a byte of its
body: the route (http_routes.py) and its method; for every route but the exports and the
probes, known Host names and same-origin browsers only (host_check.py); wrong tokens throttled
(auth.FailedTokens); the endpoint's own `admit`; and framing tornado would refuse with a bare
400 (or a Content-Length past the body limit) refused with a message. Also the body's limits
that the exchange (http_exchange.py) holds the body to as it arrives."""

from __future__ import annotations

import json
import math
import re
from http import HTTPStatus

from ingest.receivers.host_check import headers_of
from ingest.receivers.http_port import Port
from ingest.receivers.http_routes import Endpoint, Head, Reply, status_reply
from ingest.receivers.limits import BodyTooLarge, Limits
from ingest.receivers.span_intake import RETRY_AFTER_UNAVAILABLE
from ingest.receivers.status import INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE

_DIGITS = re.compile(r"[0-9]+")
BODY_METHODS = ("POST", "PUT", "PATCH")


def admission(port: Port, head: Head) -> tuple[Endpoint | None, Reply | None]:
    """The endpoint `head` is routed to (None: no route takes it, or the port is stopping), and
    its refusal from the head (None: read the body and answer it)."""
    if port.stopping:
        return None, shutting_down(head)
    endpoint = port.routes.get(head.path)
    if endpoint is None:
        exports = sorted(path for path, entry in port.routes.items() if entry.otlp)
        return None, status_reply(head, HTTPStatus.NOT_FOUND, INVALID_ARGUMENT,
                                  f"no such endpoint {head.path!r}; "
                                  f"exports go to {', '.join(exports)}")
    if head.method not in endpoint.methods:
        allowed = ", ".join(endpoint.methods)
        return None, status_reply(head, HTTPStatus.METHOD_NOT_ALLOWED, INVALID_ARGUMENT,
                                  f"use {allowed} {head.path}", {"Allow": allowed})
    if not (endpoint.otlp or endpoint.probe):
        # Before the token: a rebound page must not even learn whether a guess was right.
        refused = port.hosts.refusal(headers_of(head.headers, "Host"),
                                     headers_of(head.headers, "Origin"))
        if refused is not None:
            return endpoint, Reply(int(HTTPStatus.FORBIDDEN), "application/json",
                                   (json.dumps({"error": refused}) + "\n").encode(), {},
                                   refused)
    throttled = _throttled(port, head, endpoint)
    if throttled is not None:
        return endpoint, throttled
    refusal = endpoint.admit(head)
    if refusal is not None:
        note_token(port, head, refusal)
    if refusal is not None or head.method not in BODY_METHODS:
        return endpoint, refusal
    return endpoint, _framing_refusal(head, body_limit(port.limits, endpoint))


def _throttled(port: Port, head: Head, endpoint: Endpoint) -> Reply | None:
    """429 for a wrong token from a client that sent too many wrong ones (auth.FailedTokens),
    not counted; the right token is let through, whoever else guessed from its address."""
    authorization = head.headers.get("Authorization")
    if not port.token.required or endpoint.probe or authorization is None:
        return None
    wait = port.failed_tokens.wait(head.peer)
    if not wait or port.token.allows(authorization):
        return None
    seconds = math.ceil(wait)
    return status_reply(head, HTTPStatus.TOO_MANY_REQUESTS, RESOURCE_EXHAUSTED,
                        f"too many wrong tokens from {head.peer}; the next may be tried in "
                        f"{seconds} s", retry_after=seconds)


def note_token(port: Port, head: Head, reply: Reply) -> None:
    """A 401 to a request that carried a token: a wrong token from this client."""
    if reply.status == HTTPStatus.UNAUTHORIZED and head.headers.get("Authorization") is not None:
        port.failed_tokens.failed(head.peer)


def _framing_refusal(head: Head, limit: int) -> Reply | None:
    """What tornado would refuse with a bare 400, refused with a message instead."""
    headers = head.headers
    transfer = headers.get("Transfer-Encoding")
    length = headers.get("Content-Length")
    if transfer is not None:
        if length is not None:
            return status_reply(head, HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT,
                                "both Content-Length and Transfer-Encoding")
        if transfer.strip().lower() != "chunked":
            return status_reply(head, HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT,
                                f"unsupported Transfer-Encoding {transfer!r}")
        return None
    if length is None:
        return status_reply(head, HTTPStatus.LENGTH_REQUIRED, INVALID_ARGUMENT,
                            "Content-Length or chunked Transfer-Encoding required")
    if not _DIGITS.fullmatch(length.strip()):
        return status_reply(head, HTTPStatus.BAD_REQUEST, INVALID_ARGUMENT,
                            f"bad Content-Length {length!r}")
    if int(length) > wire_limit(head, limit):
        # Refused before reading a byte of it.
        return status_reply(head, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, RESOURCE_EXHAUSTED,
                            str(BodyTooLarge(limit)))
    return None


def body_limit(limits: Limits, endpoint: Endpoint | None) -> int:
    """The port's body limit, or the endpoint's own where it is lower."""
    limit = limits.max_body_bytes
    own = endpoint.max_body_bytes if endpoint is not None else None
    return limit if own is None else min(limit, own)


def wire_limit(head: Head, max_body_bytes: int) -> int:
    """Most body bytes accepted on the wire. A gzip body's limit is counted after inflating
    it (in the endpoint); deflate grows incompressible data by under 0.1 %, so a compressed
    body longer than this cannot inflate to fewer than `max_body_bytes`."""
    if (head.headers.get("Content-Encoding") or "").strip().lower() == "gzip":
        return max_body_bytes + max_body_bytes // 1024 + 1024
    return max_body_bytes


def shutting_down(head: Head) -> Reply:
    return status_reply(head, HTTPStatus.SERVICE_UNAVAILABLE, UNAVAILABLE,
                        "server is shutting down", retry_after=RETRY_AFTER_UNAVAILABLE)
