"""Run a budgetscope command with every outbound connection attempt recorded:
`python -m tests.support.outbound_probe LOG URL -- budgetscope arguments…`.

Python's socket layer is wrapped (connect, connect_ex, sendto and getaddrinfo: a name lookup
is how an HTTP client starts), and each destination that is not loopback, a wildcard or a
Unix socket is appended to LOG. Meanwhile a thread waits for URL (the dashboard's health
check) to answer, asks for URL's pages once, and stops the process with SIGTERM, so that the
whole start-up, a first request and the shutdown are observed. Streamlit is not ours, so
watching its sockets this way is not mocking anything we own.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
from typing import Any

_LOCAL_NAMES = {"localhost", "", None}


def _is_local(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if host in _LOCAL_NAMES:
        return True
    try:
        address = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _install(log_path: str) -> None:
    lock = threading.Lock()

    def record(what: str, destination: Any) -> None:
        with lock, open(log_path, "a", encoding="utf-8") as log:
            log.write(f"{what} {destination!r}\n")

    def check(what: str, address: Any) -> None:
        if isinstance(address, tuple) and address and not _is_local(address[0]):
            record(what, address)

    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_sendto = socket.socket.sendto
    original_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> Any:
        check("connect", address)
        return original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        check("connect_ex", address)
        return original_connect_ex(self, address)

    def sendto(self: socket.socket, data: Any, *args: Any) -> Any:
        check("sendto", args[-1] if args else None)
        return original_sendto(self, data, *args)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_local(host):
            record("getaddrinfo", host)
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = sendto  # type: ignore[method-assign, assignment]
    socket.getaddrinfo = getaddrinfo


def _open_websocket(base: str, host: str, origin: str, token: str) -> None:
    import asyncio

    import websockets

    port = int(base.rsplit(":", 1)[1])

    async def attempt() -> None:
        with contextlib.suppress(Exception):
            async with websockets.connect(
                    f"ws://{host}:{port}/_stcore/stream", host="127.0.0.1", port=port,
                    additional_headers={"Origin": origin, "Authorization": f"Bearer {token}"},
                    subprotocols=["streamlit"], open_timeout=30) as stream:
                await asyncio.sleep(1)
                await stream.close()

    asyncio.run(attempt())


def _visit_then_stop(base: str, paths: list[str]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as reply:
                if reply.read() == b"ok":
                    break
        except OSError:
            time.sleep(0.3)
    for path in paths:
        with contextlib.suppress(OSError):  # a 401 or 303 is an answer too
            urllib.request.urlopen(f"{base}{path}", timeout=30).read()
    socket_origin = os.environ.get("PROBE_WS")
    if socket_origin:  # "HOST ORIGIN TOKEN": a websocket under another spelling of the Host
        _open_websocket(base, *socket_origin.split(" "))
    time.sleep(3)  # anything Streamlit does shortly after start-up or a first session
    os.kill(os.getpid(), signal.SIGTERM)


def main() -> None:
    log_path, base, separator, *arguments = sys.argv[1:]
    assert separator == "--"
    _install(log_path)
    paths = [p for p in os.environ.get("PROBE_PATHS", "/").split(",") if p]
    threading.Thread(target=_visit_then_stop, args=(base, paths), daemon=True).start()
    from budgetscope.cli import main as budgetscope

    sys.argv = ["budgetscope", *arguments]
    budgetscope()


if __name__ == "__main__":
    main()
