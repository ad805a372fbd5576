"""`POST /cli` on serve's OTLP/HTTP port: the read API through which `report`, `run`, `check`
and `simulate` work while `budgetscope serve` holds the file (docs/operations.md, "The CLI
while serve runs").

The request is `{"argv": ["report", "weekly", "--format", "csv"]}` with `Content-Type:
application/json` and the same bearer token as the exports and /metrics. The answer streams
the exact bytes the command writes, as it writes them, so that the client prints what the
command prints on the file and the server holds a few chunks of it whatever its size: JSON
lines (`application/x-ndjson`, sent chunked), each one of

    {"stdout": BASE64}    bytes the command wrote to its standard output, in order
    {"stderr": BASE64}    bytes it wrote to its standard error
    {"status": N}         its exit status: the last line, and only once it is done

An answer without its status line was cut short (the connection lost, the server stopping)
and is no answer (budgetscope/read_api_answer.py reads it back, for the CLI). Which commands
are allowed, and how they run, is the runner's business (budgetscope/server/read_api.py);
this module is the HTTP side: token, media type, size, the answer's lines, and a pool of its
own with a bound (two run, eight wait, more are answered 503 with Retry-After), so that a
slow report never takes a thread of the exports or of the health checks.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, Protocol

from budgetscope.read_api_answer import ANSWER_TYPE
from ingest.receivers.auth import BearerToken
from ingest.receivers.bounded_pool import BoundedPool
from ingest.receivers.http_routes import (
    JSON,
    AnswerStream,
    ClientGone,
    Head,
    Reply,
    Request,
    streamed,
)

PATH = "/cli"
MAX_BODY_BYTES = 64 * 1024
# Two commands at once (the machine's DuckDB threads are shared with the writer), and a few
# waiting; more are answered 503 with Retry-After.
THREADS = 2
MOST_WAITING = 8
# Bytes of one stream gathered before they are sent as one line (fewer, larger chunks).
LINE_BYTES = 64 * 1024

Write = Callable[[bytes], None]


class Commands(Protocol):
    """What runs the commands (budgetscope/server/read_api.ServedCommands)."""

    refused: type[Exception]

    def check(self, argv: object) -> list[str]:
        """The arguments of an allowed command, else raises `refused`."""

    def stream(self, arguments: list[str], stdout: Write, stderr: Write) -> int:
        """Run the command, its output written as it comes; its exit status. ClientGone
        raised by a write stops it."""


def _json_reply(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None,
                message: str = "") -> Reply:
    body = (json.dumps(payload, ensure_ascii=True) + "\n").encode("utf-8")
    return Reply(status, JSON, body, dict(headers or {}), message)


def _error(status: HTTPStatus, message: str, headers: dict[str, str] | None = None) -> Reply:
    return _json_reply(int(status), {"error": message}, headers, message)


class _Lines:
    """The answer's JSON lines, written to the stream: a stream's bytes are gathered up to
    LINE_BYTES, and sent when the other stream writes or the command ends, so that the lines
    keep the order in which the command wrote."""

    def __init__(self, stream: AnswerStream) -> None:
        self.stream = stream
        self.name = "stdout"
        self.held: list[bytes] = []
        self.size = 0

    def writer(self, name: str) -> Write:
        def write(data: bytes) -> None:
            if not data:
                return
            if name != self.name or self.size >= LINE_BYTES:
                self.flush()
                self.name = name
            self.held.append(bytes(data))
            self.size += len(data)
        return write

    def flush(self) -> None:
        if self.held:
            data = base64.b64encode(b"".join(self.held)).decode("ascii")
            self.held, self.size = [], 0
            self.stream.write(f'{{"{self.name}": "{data}"}}\n'.encode("ascii"))

    def end(self, status: int) -> None:
        self.flush()
        self.stream.write(f'{{"status": {int(status)}}}\n'.encode("ascii"))


class CliEndpoint:
    methods = ("POST",)
    exports = False
    otlp = False
    probe = False
    streams = True
    max_body_bytes = MAX_BODY_BYTES

    def __init__(self, commands: Commands, token: BearerToken) -> None:
        self.commands = commands
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
            arguments = self.commands.check(payload["argv"])
        except self.commands.refused as error:
            return _error(HTTPStatus.FORBIDDEN, str(error))
        stream = request.stream
        assert stream is not None  # the receiver gives one to an endpoint that streams
        stream.start(int(HTTPStatus.OK), ANSWER_TYPE, {"Cache-Control": "no-store"})
        lines = _Lines(stream)
        try:
            status = self.commands.stream(arguments, lines.writer("stdout"),
                                          lines.writer("stderr"))
            lines.end(status)
        except ClientGone:
            pass  # nobody to answer: the command was stopped at its next write
        return streamed()
