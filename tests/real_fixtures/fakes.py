"""The fake world a real-fixture scenario runs against, all on 127.0.0.1: a model server
(OpenAI-compatible chat completions, and Anthropic's Messages API on /v1/messages) whose answers
the scenario scripts one by one, HTTP and gRPC tool servers whose
paths/methods say how they answer, and a capture receiver that keeps every OTLP trace request
the real exporter posts. Runs in the generator's own process (stdlib + grpcio only)."""

from __future__ import annotations

import gzip
import json
import select
import socket
import struct
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc

from tests.real_fixtures import fake_usage

# How long a "slow" fake waits before answering: far past every client timeout the scenarios set
# (0.3 s), so the client gives up first, and short enough that the server thread ends soon after.
SLOW_SECONDS = 1.5
# A slow success: well inside every client timeout, and long enough (against the 1-5 ms of the
# other calls) that the step which waits for it is the run's culprit beyond doubt.
DELAY_SECONDS = 0.2


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that timed out closed its socket before the slow answer: expected here
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        # Node's fetch and http clients stream bodies in chunks, without a Content-Length
        body = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()  # the blank line after the last (empty) chunk
                return bytes(body)
            body += self.rfile.read(size)
            self.rfile.readline()

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _serve(handler: type[BaseHTTPRequestHandler]) -> _QuietServer:
    server = _QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ---------------------------------------------------------------------------------------------
# Model server: POST /_script with a list of actions; each /v1/chat/completions or /v1/messages
# takes the next.

def _tool_calls(action: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools a "tool_call" action asks for: one (`name`, `arguments`), or several in one
    answer (`calls`, a list of those), which frameworks run in parallel."""
    return action.get("calls") or [{"name": action["name"],
                                     "arguments": action.get("arguments", {})}]


def _completion(model: str, action: dict[str, Any], number: int,
                usage: dict[str, Any]) -> dict[str, Any]:
    if action.get("do") == "tool_call":
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{number}_{i}", "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))}}
            for i, call in enumerate(_tool_calls(action))]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": action.get("text", "done")}
        finish = "stop"
    return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage}


_ERRORS = {
    503: ({"error": {"message": "The server is overloaded", "type": "server_error"}}, {}),
    429: ({"error": {"message": "Rate limit reached for requests", "type": "requests",
                     "code": "rate_limit_exceeded"}}, {"Retry-After": "0"}),
}


def _anthropic_message(model: str, action: dict[str, Any], number: int,
                       usage: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages API answer: the same actions as `_completion`, in that API's shape."""
    if action.get("do") == "tool_call":
        content = [{"type": "tool_use", "id": f"toolu_{number}_{i}", "name": call["name"],
                    "input": call.get("arguments", {})}
                   for i, call in enumerate(_tool_calls(action))]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": action.get("text", "done")}]
        stop = "end_turn"
    return {"id": f"msg_{number:04d}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": usage}


# Anthropic's error bodies; 529 is its "overloaded" status (no other API uses it)
_ANTHROPIC_ERRORS = {
    503: ({"type": "error", "error": {"type": "api_error", "message": "Service unavailable"}},
          {}),
    429: ({"type": "error", "error": {"type": "rate_limit_error",
                                      "message": "Number of requests has exceeded your rate "
                                                 "limit"}}, {"retry-after": "0"}),
    529: ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, {}),
}


class FakeModelServer:
    """Answers chat completions (POST …/chat/completions) and Anthropic messages (POST
    /v1/messages) from one script; an empty script answers "done". Actions: ok (with `text`),
    tool_call (`name`/`arguments`, or `calls`), slow (answers after `seconds`, SLOW_SECONDS by
    default, with its `then` action, ok by default), status (`code`: 503, 429, and 529 on the
    Anthropic route), stream_error (a streamed Anthropic answer that overloads after its
    message_start). Any action may carry `usage` (the API's spelling) to replace the billed
    figures of fake_usage.

    Every 2xx answer carries usage (streamed: OpenAI's only with `stream_options.include_usage`,
    Anthropic's in message_start and message_delta) and is logged in `billed`, with whether the
    client received that usage; error answers carry none and bill nothing."""

    def __init__(self) -> None:
        self.script: deque[dict[str, Any]] = deque()
        self.served: list[dict[str, Any]] = []
        self.billed: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._anthropic_calls = 0
        owner = self

        class Handler(_Handler):
            def do_POST(self) -> None:
                body = self._body()
                if self.path == "/_script":
                    owner.script.extend(json.loads(body))
                    self._send(200, {"queued": len(owner.script)})
                    return
                anthropic = self.path.split("?")[0].endswith("/v1/messages")
                if not (anthropic or self.path.endswith("/chat/completions")):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                request = json.loads(body or b"{}")
                with owner._lock:
                    action = owner.script.popleft() if owner.script else {"do": "ok"}
                    served = {"model": request.get("model"), "action": action,
                              "start_ns": time.time_ns()}
                    owner.served.append(served)
                    # the request's own number, whatever else arrives while it is answered
                    number = len(owner.served)
                    if anthropic:
                        owner._anthropic_calls += 1
                    anthropic_number = owner._anthropic_calls
                try:
                    self._answer(request, action, number, anthropic, anthropic_number)
                finally:
                    served["end_ns"] = time.time_ns()

            def _answer(self, request: dict[str, Any], action: dict[str, Any], number: int,
                        anthropic: bool, anthropic_number: int) -> None:
                if action.get("do") == "slow":
                    time.sleep(action.get("seconds", SLOW_SECONDS))
                    action = {**action.get("then", {"do": "ok"}),
                              **({"usage": action["usage"]} if "usage" in action else {})}
                model = request.get("model", "?")
                request_id = f"req_{number:04d}"
                if action.get("do") == "status":
                    errors = _ANTHROPIC_ERRORS if anthropic else _ERRORS
                    payload, headers = errors[action["code"]]
                    headers = {**headers, ("request-id" if anthropic else "x-request-id"):
                               request_id}
                    self._send(action["code"], payload, headers)
                    return
                stream = bool(request.get("stream"))
                # a client that hung up (its timeout fired while the model worked) is billed
                # all the same, as providers do, but never sees the usage
                gone = self._client_gone()
                if anthropic:
                    usage = fake_usage.anthropic_usage(request, action, anthropic_number)
                    message = _anthropic_message(model, action, number, usage)
                    headers = {"request-id": request_id}
                    failed = action.get("do") == "stream_error"
                    if failed:
                        assert stream, "stream_error is an action for a streamed request"
                        # what message_start said: the input, and one token of output
                        usage = {**usage, "output_tokens": 1}
                    owner._bill(number, request_id, "anthropic", model, stream, usage,
                                returned=not gone, failed=failed,
                                why="client gone" if gone else
                                "overloaded after message_start" if failed else "")
                    if stream:
                        self._stream(fake_usage.anthropic_stream(
                            message, _ANTHROPIC_ERRORS[529][0] if failed else None), headers)
                    else:
                        self._send(200, message, headers)
                    return
                usage = fake_usage.openai_usage(request, action, number)
                completion = _completion(model, action, number, usage)
                headers = {"x-request-id": request_id}
                include = bool((request.get("stream_options") or {}).get("include_usage"))
                returned = not gone and (include or not stream)
                owner._bill(number, request_id, "openai", model, stream, usage,
                            returned=returned, failed=False,
                            why="client gone" if gone else "" if returned
                            else "stream without stream_options.include_usage")
                if stream:
                    self._stream(fake_usage.openai_stream(completion, include), headers)
                else:
                    self._send(200, completion, headers)

            def _client_gone(self) -> bool:
                """The client closed its connection (its timeout fired) before the answer."""
                readable, _, _ = select.select([self.connection], [], [], 0)
                if not readable:
                    return False
                try:
                    return self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    return True

            def _stream(self, events: list[bytes], headers: dict[str, str]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()
                self.close_connection = True

            def do_GET(self) -> None:
                # the harness asks what was served, with when: its timing of calls a framework
                # makes where the harness has no hook of its own
                self._send(200, owner.served)

        self.server = _serve(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def _bill(self, number: int, request_id: str, api: str, model: str, stream: bool,
              usage: dict[str, Any], returned: bool, failed: bool, why: str) -> None:
        entry = fake_usage.billed_entry(number, request_id, api, model, stream, usage,
                                        returned, failed, why)
        with self._lock:
            self.billed.append(entry)

    def settle(self, timeout: float = SLOW_SECONDS + 5) -> None:
        """Wait until every request served has been answered (a slow answer to a client that
        timed out is still on its way): the billing log is complete after this."""
        deadline = time.monotonic() + timeout
        while any("end_ns" not in served for served in self.served):
            if time.monotonic() > deadline:
                raise RuntimeError("the fake model server is still answering")
            time.sleep(0.05)

    def close(self) -> None:
        self.server.shutdown()


# ---------------------------------------------------------------------------------------------
# HTTP tool server: the path says what happens.

class FakeToolServer:
    """GET /ok → 200; /delay → 200 after DELAY_SECONDS; /slow → answers after SLOW_SECONDS;
    /503, /429 → that status;
    /flaky → 503 the first time, 200 after; POST /write → 201, and the write is recorded."""

    def __init__(self) -> None:
        self.writes: list[dict[str, Any]] = []
        self.flaky_seen = 0
        owner = self

        class Handler(_Handler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/slow":
                    time.sleep(SLOW_SECONDS)
                    self._send(200, {"report": "late"})
                elif path == "/delay":
                    time.sleep(DELAY_SECONDS)
                    self._send(200, {"report": "took a while"})
                elif path in ("/503", "/429"):
                    self._send(int(path[1:]), {"error": "unavailable" if path == "/503"
                                               else "too many requests"})
                elif path == "/flaky":
                    owner.flaky_seen += 1
                    if owner.flaky_seen == 1:
                        self._send(503, {"error": "unavailable"})
                    else:
                        self._send(200, {"report": "second try"})
                else:
                    self._send(200, {"report": "ok"})

            def do_POST(self) -> None:
                body = self._body()
                owner.writes.append({"path": self.path, "body": body.decode(errors="replace")})
                self._send(201, {"created": len(owner.writes)})

        self.server = _serve(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()


# ---------------------------------------------------------------------------------------------
# gRPC tool server: service tools.Tools, methods Ok, Delay, Slow, Unavailable, Exhausted
# (raw bytes, no generated stubs).

def _grpc_ok(request: bytes, context: grpc.ServicerContext) -> bytes:
    return b"ok:" + request


def _grpc_slow(request: bytes, context: grpc.ServicerContext) -> bytes:
    time.sleep(SLOW_SECONDS)
    return b"late"


def _grpc_delay(request: bytes, context: grpc.ServicerContext) -> bytes:
    time.sleep(DELAY_SECONDS)
    return b"ok after a while"


def _grpc_unavailable(request: bytes, context: grpc.ServicerContext) -> bytes:
    context.abort(grpc.StatusCode.UNAVAILABLE, "tool backend is down")
    return b""


def _grpc_exhausted(request: bytes, context: grpc.ServicerContext) -> bytes:
    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "quota exceeded")
    return b""


class FakeGrpcToolServer:
    SERVICE = "tools.Tools"

    def __init__(self) -> None:
        from concurrent import futures

        functions = {"Ok": _grpc_ok, "Delay": _grpc_delay, "Slow": _grpc_slow,
                     "Unavailable": _grpc_unavailable, "Exhausted": _grpc_exhausted}
        handlers = {name: grpc.unary_unary_rpc_method_handler(function)
                    for name, function in functions.items()}
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(self.SERVICE, handlers),))
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.target = f"127.0.0.1:{port}"

    def close(self) -> None:
        self.server.stop(grace=None)


# ---------------------------------------------------------------------------------------------
# Capture receiver: keeps each POST /v1/traces body; written out as the Collector's
# length-prefixed protobuf stream, a form `budgetscope ingest` reads (ingest/files/sources.py).

class CaptureReceiver:
    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.other_signals: dict[str, int] = {}
        owner = self

        class Handler(_Handler):
            def do_POST(self) -> None:
                body = self._body()
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    if self.headers.get("Content-Type") != "application/x-protobuf":
                        self._send(415, {"error": "only http/protobuf is captured"})
                        return
                    owner.requests.append(body)
                else:
                    owner.other_signals[self.path] = owner.other_signals.get(self.path, 0) + 1
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = _serve(Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}"

    def write(self, path: Path) -> int:
        """The captured requests as one length-prefixed stream; returns how many."""
        with path.open("wb") as out:
            for body in self.requests:
                out.write(struct.pack(">I", len(body)))
                out.write(body)
        return len(self.requests)

    def close(self) -> None:
        self.server.shutdown()


class FakeWorld:
    """Every fake a scenario may use, started together and described to it through env vars."""

    def __init__(self) -> None:
        self.model = FakeModelServer()
        self.tools = FakeToolServer()
        self.grpc_tools = FakeGrpcToolServer()
        self.capture = CaptureReceiver()

    def environment(self) -> dict[str, str]:
        return {
            "FAKE_MODEL_URL": self.model.url,
            "FAKE_TOOL_URL": self.tools.url,
            "FAKE_GRPC_TARGET": self.grpc_tools.target,
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.capture.endpoint,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.capture.endpoint + "/v1/traces",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        }

    def close(self) -> None:
        for fake in (self.model, self.tools, self.grpc_tools, self.capture):
            fake.close()
