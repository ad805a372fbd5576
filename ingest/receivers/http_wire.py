"""How an answer of the OTLP/HTTP port is spelled on the wire: the status line's phrase, header
names as we spell them, and the whole bytes of an answer sent on a connection taken from
tornado (a refusal from the head, http_exchange.py)."""

from __future__ import annotations

from http import HTTPStatus

from tornado import httputil

from ingest.receivers.http_routes import Reply


class SpelledHeaders(httputil.HTTPHeaders):
    """Header names sent as we spell them: tornado would send `Www-Authenticate`, and clients
    that look the name up case-sensitively (a dict of http.client's headers) miss it."""

    def __setitem__(self, name: str, value: str) -> None:
        super().__setitem__(name, value)
        self.__dict__.setdefault("_spelling", {})[name.lower()] = name

    def get_all(self):  # type: ignore[no-untyped-def]
        spelling = self.__dict__.get("_spelling", {})
        for name, value in super().get_all():
            yield spelling.get(name.lower(), name), value


def phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def response_bytes(reply: Reply) -> bytes:
    lines = [f"HTTP/1.1 {reply.status} {phrase(reply.status)}",
             f"Content-Type: {reply.content_type}", f"Content-Length: {len(reply.body)}",
             "Connection: close"]
    lines += [f"{name}: {value}" for name, value in reply.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + reply.body
