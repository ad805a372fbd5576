"""Servers on 127.0.0.1 that the budget SDK's tests call: a tool that hangs, a dependency with
an idempotency ledger, a proxy that lets a request commit and then withholds the reply, a handler
that honours the propagated deadline, a request counter, a server that trickles its answer a
byte at a time, and scripted answers (503 with Retry-After, …).

Each is a real threaded HTTP server on a free port; nothing in the SDK is replaced. Each records
what it saw itself (requests, keys, when the client went away), which is what the tests judge
the SDK and budgetscope against."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from budgetscope_sdk import RemoteDeadline


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: Any


def _reply(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    # The caller may have given up (a cancelled hedge, a timed-out call): what the tests expect.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        handler.wfile.write(data)


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def _hold_until_client_closes(handler: BaseHTTPRequestHandler) -> None:
    """Never answer: block until the client closes its end (EOF), which is what proves the
    client released its connection after giving up."""
    handler.connection.settimeout(30)
    try:
        while handler.connection.recv(1024):
            pass
    except OSError:
        pass
    handler.close_connection = True


@contextmanager
def serve(handler_class: type[BaseHTTPRequestHandler], state: Any) -> Iterator[tuple[str, Any]]:
    server = _Server(("127.0.0.1", 0), handler_class)
    server.state = state
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


# -- a tool that hangs -----------------------------------------------------------------------
class HangState:
    def __init__(self) -> None:
        self.received = threading.Event()
        self.client_closed = threading.Event()
        self.closed_at: float | None = None  # time.monotonic() when the client went away
        self.headers: dict[str, str] = {}


class HangingTool(_Quiet):
    def do_POST(self) -> None:
        state: HangState = self.server.state
        _read_body(self)
        state.headers = dict(self.headers.items())
        state.received.set()
        _hold_until_client_closes(self)
        state.closed_at = time.monotonic()
        state.client_closed.set()

    do_GET = do_POST


# -- a dependency with an idempotency ledger ---------------------------------------------------
class LedgerState:
    """Executes each idempotency key once and replays its stored answer afterwards, or, with
    `dedupe=False`, executes every request (a dependency that ignores the key). The first
    `hang_first` requests are held unanswered and never executed (lost before the work)."""

    def __init__(self, dedupe: bool = True, hang_first: int = 0) -> None:
        self.lock = threading.Lock()
        self.dedupe = dedupe
        self.hang_left = hang_first
        self.executions: list[str] = []
        self.seen_keys: list[str] = []
        self.answers: dict[str, dict[str, Any]] = {}
        self.requests = 0
        self.posts = 0


class LedgerService(_Quiet):
    def do_POST(self) -> None:
        state: LedgerState = self.server.state
        _read_body(self)
        key = self.headers.get("Idempotency-Key")
        with state.lock:
            state.requests += 1
            state.posts += 1
            hang = state.hang_left > 0
            if hang:
                state.hang_left -= 1
        if hang:
            _hold_until_client_closes(self)
            return
        with state.lock:
            if not key:
                _reply(self, 400, {"error": "Idempotency-Key required"})
                return
            state.seen_keys.append(key)
            answer = state.answers.get(key) if state.dedupe else None
            if answer is None:
                state.executions.append(self.path)
                answer = state.answers[key] = {"status": "cancelled", "path": self.path,
                                               "execution": len(state.executions)}
        _reply(self, 200, answer)

    def do_GET(self) -> None:
        state: LedgerState = self.server.state
        with state.lock:
            state.requests += 1
            if self.path.startswith("/operations/"):
                key = self.path.rsplit("/", 1)[1]
                answer = state.answers.get(key)
                _reply(self, 200 if answer else 404, answer or {"error": "no such operation"})
                return
        _reply(self, 404, {"error": "not found"})


# -- a proxy that lets the first request commit and drops its reply ----------------------------
class ProxyState:
    def __init__(self, upstream: str, drop_first: int = 1) -> None:
        self.upstream = upstream
        self.drop_left = drop_first
        self.lock = threading.Lock()
        self.dropped = 0
        self.forwarded = 0
        self.client_closed_after_drop = threading.Event()


class CommitThenDropProxy(_Quiet):
    def _forward(self) -> None:
        state: ProxyState = self.server.state
        body = _read_body(self)
        host, port = state.upstream.removeprefix("http://").split(":")
        upstream = HTTPConnection(host, int(port), timeout=10)
        headers = {key: value for key, value in self.headers.items()
                   if key.lower() not in ("host", "connection")}
        upstream.request(self.command, self.path, body=body or None, headers=headers)
        response = upstream.getresponse()
        payload = response.read()
        upstream.close()
        with state.lock:
            state.forwarded += 1
            drop = state.drop_left > 0
            if drop:
                state.drop_left -= 1
                state.dropped += 1
        if drop:  # the dependency has committed; the caller never hears of it
            _hold_until_client_closes(self)
            state.client_closed_after_drop.set()
            return
        self.send_response(response.status)
        self.send_header("Content-Type", response.getheader("Content-Type") or "text/plain")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_POST = _forward
    do_GET = _forward


# -- a handler that stops itself at the caller's deadline -------------------------------------
class ExportState:
    def __init__(self, batches: int, batch_seconds: float, margin: float) -> None:
        self.batches = batches
        self.batch_seconds = batch_seconds
        self.margin = margin
        self.ledger: list[dict[str, Any]] = []
        self.written = 0


class CooperativeExport(_Quiet):
    def do_POST(self) -> None:
        state: ExportState = self.server.state
        _read_body(self)
        deadline = RemoteDeadline.from_headers(dict(self.headers.items()))
        if deadline is None:
            _reply(self, 400, {"error": "no deadline propagated"})
            return
        for index in range(state.batches):
            # Checked before each unit of expensive work, with a margin for the reply's trip.
            if deadline.expired(state.margin):
                entry = {"status": "cancelled", "completed_batches": index,
                         "total_batches": state.batches}
                state.ledger.append(entry)
                _reply(self, 200, entry)
                return
            time.sleep(state.batch_seconds)
            state.written += 1
        entry = {"status": "succeeded", "completed_batches": state.batches,
                 "total_batches": state.batches}
        state.ledger.append(entry)
        _reply(self, 200, entry)


# -- a request counter -------------------------------------------------------------------------
class CountState:
    def __init__(self) -> None:
        self.requests = 0


class CountingTool(_Quiet):
    def do_GET(self) -> None:
        self.server.state.requests += 1
        _reply(self, 200, {"ok": True})

    do_POST = do_GET


# -- a tool whose answers are scripted per path -----------------------------------------------
class ScriptState:
    """`script[path]` is a list of answers used in turn (the last repeats): (status, delay_s) or
    (status, delay_s, headers). Records each request's arrival (monotonic) and headers."""

    def __init__(self, script: dict[str, list[tuple[Any, ...]]]) -> None:
        self.script = script
        self.calls: dict[str, int] = {}
        self.arrivals: dict[str, list[float]] = {}
        self.headers: dict[str, list[dict[str, str]]] = {}
        self.lock = threading.Lock()


class ScriptedTool(_Quiet):
    def _answer(self) -> None:
        state: ScriptState = self.server.state
        _read_body(self)
        path = self.path.split("?", 1)[0]
        with state.lock:
            turn = state.calls.get(path, 0)
            state.calls[path] = turn + 1
            state.arrivals.setdefault(path, []).append(time.monotonic())
            state.headers.setdefault(path, []).append(dict(self.headers.items()))
            answers = state.script.get(path, [(200, 0.0)])
            status, delay, *rest = answers[min(turn, len(answers) - 1)]
        time.sleep(delay)
        extra: dict[str, str] = rest[0] if rest else {}
        data = json.dumps({"path": path, "turn": turn + 1}).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json",
                            "Content-Length": str(len(data)), **extra}.items():
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    do_GET = _answer
    do_POST = _answer


# -- a server that trickles its answer --------------------------------------------------------
class TrickleState:
    """Answers 200 with `size` bytes sent one at a time every `interval` seconds (`part`
    `body`), or sends its header lines that slowly (`headers`): each byte keeps a per-read
    timeout from firing. Records how long each connection lasted, as the server saw it."""

    def __init__(self, interval: float = 0.1, size: int = 30, part: str = "body") -> None:
        self.interval = interval
        self.size = size
        self.part = part
        self.lock = threading.Lock()
        self.lasted: list[float] = []  # seconds from the request to the client going away
        self.sent: list[int] = []  # bytes sent before it went away (or all of them)
        self.finished = threading.Event()


class TrickleTool(_Quiet):
    def do_GET(self) -> None:
        state: TrickleState = self.server.state
        started = time.monotonic()
        sent = 0
        try:
            if state.part == "headers":
                head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Pad: " + b"x" * state.size
                for byte in head:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    sent += 1
                    time.sleep(state.interval)
                self.wfile.write(b"\r\n\r\nok")
            else:
                self.send_response(200)
                self.send_header("Content-Length", str(state.size))
                self.end_headers()
                self.wfile.flush()
                for _ in range(state.size):
                    time.sleep(state.interval)
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    sent += 1
            # All sent: the client may still be reading; wait for it to go away.
            _hold_until_client_closes(self)
        except OSError:
            pass  # the client closed the connection: what the test measures
        finally:
            with state.lock:
                state.lasted.append(time.monotonic() - started)
                state.sent.append(sent)
            state.finished.set()
            self.close_connection = True


# -- an OpenAI-compatible chat completions server ----------------------------------------------
class ModelState:
    """Answers /v1/chat/completions: a call to `tool` (with `arguments`) while the conversation
    holds no tool result, then a final text. Records every request body."""

    def __init__(self, tool: str, arguments: dict[str, Any], answer: str = "done",
                 delay: float = 0.0) -> None:
        self.tool = tool
        self.arguments = arguments
        self.answer = answer
        self.delay = delay
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []


class FakeModel(_Quiet):
    def do_POST(self) -> None:
        state: ModelState = self.server.state
        body = json.loads(_read_body(self) or b"{}")
        state.requests.append(body)
        state.headers.append(dict(self.headers.items()))
        time.sleep(state.delay)
        messages = body.get("messages", [])
        tool_results = [m for m in messages if m.get("role") == "tool"]
        model = body.get("model", "fake-model")
        if tool_results:
            message: dict[str, Any] = {"role": "assistant",
                                       "content": f"{state.answer}: {tool_results[-1]['content']}"}
            finish = "stop"
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{len(state.requests)}", "type": "function",
                "function": {"name": state.tool, "arguments": json.dumps(state.arguments)}}]}
            finish = "tool_calls"
        _reply(self, 200, {
            "id": f"chatcmpl-{len(state.requests)}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
