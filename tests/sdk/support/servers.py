"""Servers on 127.0.0.1 that the budget SDK's tests call: a tool that hangs, a dependency with
an idempotency ledger, a proxy that lets a request commit and then withholds the reply, a handler
that honours the propagated deadline, a request counter, a server that trickles its answer a
byte at a time, scripted answers (503 with Retry-After, …), and a model server
(OpenAI-compatible chat completions and Anthropic Messages, JSON and streamed) that reports usage
and logs what it billed.

Each is a real threaded HTTP server on a free port; nothing in the SDK is replaced. Each records
what it saw itself (requests, keys, when the client went away), which is what the tests judge
the SDK and budgetscope against."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import ROUND_HALF_EVEN, Decimal
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from budgetscope_sdk import RemoteDeadline


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: Any


def reply(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
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


# How often a test's server looks whether it was told to stop.
SHUTDOWN_POLL_S = 0.02


@contextmanager
def serve(handler_class: type[BaseHTTPRequestHandler], state: Any) -> Iterator[tuple[str, Any]]:
    server = _Server(("127.0.0.1", 0), handler_class)
    server.state = state
    # serve_forever looks for shutdown() every poll_interval: at its default, 0.5 s, every
    # test that served paid half a second to stop (about 50 in tests/sdk/)
    thread = threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


class Quiet(BaseHTTPRequestHandler):
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


class HangingTool(Quiet):
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


class LedgerService(Quiet):
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
                reply(self, 400, {"error": "Idempotency-Key required"})
                return
            state.seen_keys.append(key)
            answer = state.answers.get(key) if state.dedupe else None
            if answer is None:
                state.executions.append(self.path)
                answer = state.answers[key] = {"status": "cancelled", "path": self.path,
                                               "execution": len(state.executions)}
        reply(self, 200, answer)

    def do_GET(self) -> None:
        state: LedgerState = self.server.state
        with state.lock:
            state.requests += 1
            if self.path.startswith("/operations/"):
                key = self.path.rsplit("/", 1)[1]
                answer = state.answers.get(key)
                reply(self, 200 if answer else 404, answer or {"error": "no such operation"})
                return
        reply(self, 404, {"error": "not found"})


# -- a proxy that lets the first request commit and drops its reply ----------------------------
class ProxyState:
    def __init__(self, upstream: str, drop_first: int = 1) -> None:
        self.upstream = upstream
        self.drop_left = drop_first
        self.lock = threading.Lock()
        self.dropped = 0
        self.forwarded = 0
        self.client_closed_after_drop = threading.Event()


class CommitThenDropProxy(Quiet):
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


class CooperativeExport(Quiet):
    def do_POST(self) -> None:
        state: ExportState = self.server.state
        _read_body(self)
        deadline = RemoteDeadline.from_headers(dict(self.headers.items()))
        if deadline is None:
            reply(self, 400, {"error": "no deadline propagated"})
            return
        for index in range(state.batches):
            # Checked before each unit of expensive work, with a margin for the reply's trip.
            if deadline.expired(state.margin):
                entry = {"status": "cancelled", "completed_batches": index,
                         "total_batches": state.batches}
                state.ledger.append(entry)
                reply(self, 200, entry)
                return
            time.sleep(state.batch_seconds)
            state.written += 1
        entry = {"status": "succeeded", "completed_batches": state.batches,
                 "total_batches": state.batches}
        state.ledger.append(entry)
        reply(self, 200, entry)


# -- a request counter -------------------------------------------------------------------------
class CountState:
    def __init__(self) -> None:
        self.requests = 0


class CountingTool(Quiet):
    def do_GET(self) -> None:
        self.server.state.requests += 1
        reply(self, 200, {"ok": True})

    do_POST = do_GET


# -- a tool whose answers are scripted per path -----------------------------------------------
class ScriptState:
    """`script[path]` is a list of answers used in turn (the last repeats): (status, delay_s),
    (status, delay_s, headers) or (status, delay_s, headers, body bytes). Records each
    request's arrival (monotonic), headers and body."""

    def __init__(self, script: dict[str, list[tuple[Any, ...]]]) -> None:
        self.script = script
        self.calls: dict[str, int] = {}
        self.arrivals: dict[str, list[float]] = {}
        self.headers: dict[str, list[dict[str, str]]] = {}
        self.bodies: dict[str, list[bytes]] = {}
        self.lock = threading.Lock()


class ScriptedTool(Quiet):
    def _answer(self) -> None:
        state: ScriptState = self.server.state
        body = _read_body(self)
        path = self.path.split("?", 1)[0]
        with state.lock:
            turn = state.calls.get(path, 0)
            state.calls[path] = turn + 1
            state.arrivals.setdefault(path, []).append(time.monotonic())
            state.headers.setdefault(path, []).append(dict(self.headers.items()))
            state.bodies.setdefault(path, []).append(body)
            answers = state.script.get(path, [(200, 0.0)])
            status, delay, *rest = answers[min(turn, len(answers) - 1)]
        time.sleep(delay)
        extra: dict[str, str] = rest[0] if rest else {}
        data = rest[1] if len(rest) > 1 else json.dumps({"path": path,
                                                         "turn": turn + 1}).encode()
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


class TrickleTool(Quiet):
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


# -- a model server that bills: OpenAI-compatible chat completions and Anthropic Messages -----
class ModelState:
    """Answers /v1/chat/completions (OpenAI-compatible) and /v1/messages (Anthropic): a call to
    `tool` (with `arguments`) while the conversation holds no tool result, then a final text;
    with `tool=None` always a text. `stream: true` is answered with server-sent events, each
    event written and flushed on its own (chunked), in that API's shape; a chat completions
    stream carries its usage only when asked (`stream_options.include_usage`), as OpenAI does.

    Usage: each answer takes the next entry of `usage` (input with its cache, `cache_read`,
    `cache_write`, `output`, `reasoning`; `status` for an error instead, whose body reports the
    usage only with `usage_on_error`), or what `usage` returns for the request's body when it is
    a function (the server measuring what it was sent); with none left, 10 in and 5 out. The
    output is cut to the `max_tokens` / `max_completion_tokens` the request asked for, as a
    model stops there.
    Every answer that reported usage is logged in `billed`, with what it cost at `prices`
    (model → USD per million tokens: input, output, cache_read, cache_write; a missing cache
    rate is the input rate), computed here in decimals, under the request's `X-Call` header:
    the truth the SDK's and budgetscope's numbers are judged against. Records every request
    body and its headers."""

    def __init__(self, tool: str | None, arguments: dict[str, Any] | None = None,
                 answer: str = "done", delay: float = 0.0,
                 usage: list[dict[str, Any]] | Callable[[dict[str, Any]], dict[str, Any]]
                 | None = None,
                 prices: dict[str, dict[str, str]] | None = None) -> None:
        self.tool = tool
        self.arguments = arguments or {}
        self.answer = answer
        self.delay = delay
        self.usage = usage if callable(usage) else list(usage or [])
        self.prices = prices or {}
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.billed: list[dict[str, Any]] = []

    def next_usage(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if callable(self.usage):
                entry = dict(self.usage(body))
            else:
                entry = dict(self.usage.pop(0)) if self.usage else {"input": 10, "output": 5}
        asked = [value for value in (body.get("max_tokens"), body.get("max_completion_tokens"))
                 if isinstance(value, int)]
        entry["cut"] = bool(asked) and entry.get("output", 0) > min(asked)
        if entry["cut"]:
            entry["output"] = min(asked)
        return entry

    def bill(self, model: str, api: str, body: dict[str, Any], entry: dict[str, Any],
             call: str | None = None) -> None:
        counts = {key: int(entry.get(key, 0)) for key in ("input", "cache_read", "cache_write",
                                                         "output", "reasoning")}
        rates = self.prices.get(model)
        cost_nano = None
        if rates is not None:
            fresh = counts["input"] - counts["cache_read"] - counts["cache_write"]
            usd = (fresh * Decimal(rates["input"])
                   + counts["cache_read"] * Decimal(rates.get("cache_read", rates["input"]))
                   + counts["cache_write"] * Decimal(rates.get("cache_write", rates["input"]))
                   + counts["output"] * Decimal(rates["output"])) / 1_000_000
            cost_nano = int((usd * 10**9).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
        with self.lock:
            self.billed.append({"call": call, "model": model, "api": api,
                                "status": entry.get("status", 200),
                                "stream": body.get("stream") is True, **counts,
                                "max_tokens": body.get("max_tokens",
                                                       body.get("max_completion_tokens")),
                                "cost_nano": cost_nano})


def _openai_usage(entry: dict[str, Any]) -> dict[str, Any]:
    usage = {"prompt_tokens": entry.get("input", 0), "completion_tokens": entry.get("output", 0),
             "total_tokens": entry.get("input", 0) + entry.get("output", 0),
             "prompt_tokens_details": {"cached_tokens": entry.get("cache_read", 0)}}
    if "reasoning" in entry:  # as a reasoning model reports it
        usage["completion_tokens_details"] = {"reasoning_tokens": entry["reasoning"]}
    return usage


def _anthropic_usage(entry: dict[str, Any]) -> dict[str, Any]:
    """Anthropic counts input without its cache."""
    read, write = entry.get("cache_read", 0), entry.get("cache_write", 0)
    return {"input_tokens": entry.get("input", 0) - read - write,
            "cache_read_input_tokens": read, "cache_creation_input_tokens": write,
            "output_tokens": entry.get("output", 0)}


class FakeModel(Quiet):
    def do_POST(self) -> None:
        state: ModelState = self.server.state
        body = json.loads(_read_body(self) or b"{}")
        with state.lock:
            state.requests.append(body)
            state.headers.append(dict(self.headers.items()))
            number = len(state.requests)
        time.sleep(state.delay)
        anthropic = self.path.split("?")[0].endswith("/messages")
        api = "anthropic" if anthropic else "openai"
        model = body.get("model", "fake-model")
        entry = state.next_usage(body)
        status = entry.get("status", 200)
        if status != 200:
            error: dict[str, Any] = {"error": {"message": "The server is overloaded",
                                               "type": "server_error"}}
            if entry.get("usage_on_error"):
                error["usage"] = (_anthropic_usage if anthropic else _openai_usage)(entry)
                state.bill(model, api, body, entry, self.headers.get("X-Call"))
            reply(self, status, error)
            return
        state.bill(model, api, body, entry, self.headers.get("X-Call"))
        messages = body.get("messages", [])
        results = [m for m in messages if m.get("role") == "tool"
                   or (isinstance(m.get("content"), list) and any(
                       isinstance(part, dict) and part.get("type") == "tool_result"
                       for part in m["content"]))]
        text = f"{state.answer}: {_last_result(results)}" if results else state.answer
        calls_tool = state.tool is not None and not results
        if body.get("stream") is True:
            events = (_anthropic_events if anthropic else _openai_events)(
                model, number, text, entry, body)
            self._stream(events)
        elif anthropic:
            reply(self, 200, _anthropic_answer(state, model, number, text, calls_tool, entry))
        else:
            reply(self, 200, _openai_answer(state, model, number, text, calls_tool, entry))

    def _stream(self, events: list[str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for event in events:
                data = event.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")


def _last_result(results: list[dict[str, Any]]) -> str:
    content = results[-1]["content"]
    if isinstance(content, list):  # Anthropic: the tool_result part
        part = next(p for p in content if p.get("type") == "tool_result")
        return str(part.get("content"))
    return str(content)


def _openai_answer(state: ModelState, model: str, number: int, text: str, calls_tool: bool,
                   entry: dict[str, Any]) -> dict[str, Any]:
    if calls_tool:
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{number}", "type": "function",
            "function": {"name": state.tool, "arguments": json.dumps(state.arguments)}}]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": text}
        finish = "length" if entry["cut"] else "stop"
    return {"id": f"chatcmpl-{number}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _openai_usage(entry)}


def _anthropic_answer(state: ModelState, model: str, number: int, text: str,
                      calls_tool: bool, entry: dict[str, Any]) -> dict[str, Any]:
    if calls_tool:
        content = [{"type": "tool_use", "id": f"toolu_{number}", "name": state.tool,
                    "input": state.arguments}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": text}]
        stop = "max_tokens" if entry["cut"] else "end_turn"
    return {"id": f"msg_{number:04d}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": _anthropic_usage(entry)}


def _sse(payload: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n"


def _openai_events(model: str, number: int, text: str, entry: dict[str, Any],
                   body: dict[str, Any]) -> list[str]:
    base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    half = len(text) // 2
    events = [_sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                "content": ""}}]})]
    events += [_sse({**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
               for piece in (text[:half], text[half:])]
    events.append(_sse({**base, "choices": [{"index": 0, "delta": {},
                                            "finish_reason": "length" if entry["cut"]
                                            else "stop"}]}))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        events.append(_sse({**base, "choices": [], "usage": _openai_usage(entry)}))
    events.append(_sse("[DONE]"))
    return events


def _anthropic_events(model: str, number: int, text: str, entry: dict[str, Any],
                      body: dict[str, Any]) -> list[str]:
    usage = _anthropic_usage(entry)
    start = {**usage, "output_tokens": 1}
    return [
        _sse({"type": "message_start", "message": {
            "id": f"msg_{number:04d}", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": start}},
            "message_start"),
        _sse({"type": "content_block_start", "index": 0,
              "content_block": {"type": "text", "text": ""}}, "content_block_start"),
        _sse({"type": "content_block_delta", "index": 0,
              "delta": {"type": "text_delta", "text": text}}, "content_block_delta"),
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        _sse({"type": "message_delta", "delta": {"stop_reason": "max_tokens" if entry["cut"]
                                                 else "end_turn", "stop_sequence": None},
              "usage": {"output_tokens": usage["output_tokens"]}}, "message_delta"),
        _sse({"type": "message_stop"}, "message_stop"),
    ]
