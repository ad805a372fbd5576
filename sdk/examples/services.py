"""The services the example agent talks to, on 127.0.0.1, so the example runs anywhere: a
reports service (one report is slow), a quotes service that is overloaded once (503 with
Retry-After), and a refunds service that commits a refund and then answers too late, with a
ledger to read it back by its Idempotency-Key. Standard library only."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


class Ledger:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.refunds: dict[str, dict[str, Any]] = {}
        self.quote_calls = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    ledger: Ledger

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def _answer(self, status: int, body: dict[str, Any],
                headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json",
                            "Content-Length": str(len(data)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        # The agent may have given up on this call: it is allowed to.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == "/report":
            quarter = parse_qs(url.query).get("quarter", ["q1"])[0]
            time.sleep(2.0 if quarter == "q3" else 0.05)  # q3 misses the cache
            self._answer(200, {"quarter": quarter, "revenue": 1000})
        elif url.path == "/quote":
            with self.ledger.lock:
                self.ledger.quote_calls += 1
                first = self.ledger.quote_calls == 1
            if first:
                self._answer(503, {"error": "overloaded"}, {"Retry-After": "0"})
            else:
                self._answer(200, {"eur_usd": 1.08})
        elif url.path.startswith("/refunds/"):
            with self.ledger.lock:
                found = self.ledger.refunds.get(url.path.rsplit("/", 1)[1])
            self._answer(200 if found else 404, found or {"error": "no such refund"})
        else:
            self._answer(404, {"error": "not found"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers.get("Idempotency-Key") or ""
        with self.ledger.lock:
            refund = self.ledger.refunds.setdefault(key, {"refund": key, "status": "issued"})
        time.sleep(1.0)  # committed; the answer comes too late for the agent
        self._answer(200, refund)


@contextmanager
def running() -> Iterator[str]:
    """The services on a free port; yields their base URL."""
    handler = type("ExampleHandler", (Handler,), {"ledger": Ledger()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
