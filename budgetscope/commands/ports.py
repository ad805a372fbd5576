"""Whether a port can be listened on, asked before anything is opened or printed: a command
whose port is taken says so and stops, instead of printing an address where another program
answers, writing a database file it then leaves behind, or passing on a server library's own
log line."""

from __future__ import annotations

import socket

from budgetscope.fail import Fail


def require_free(host: str, port: int, what: str, fix: str) -> None:
    """Fail, naming `what` (e.g. "the dashboard") and `fix` (the option to change), when
    `host`:`port` cannot be bound now. Port 0 (the system picks one) is always free."""
    if port != 0:
        _bound(host, port, what, fix).close()


def hold_port(host: str, port: int, what: str, fix: str) -> socket.socket:
    """As require_free, but the port stays taken until the returned socket is closed: for a
    port a server binds after it has started others. Listening (nothing is ever accepted) is
    what keeps it: the system gives a port-0 bind any port nobody listens on, and it gave
    `serve --ui-port N --otlp-grpc-port 0` port N for gRPC (N in its range of free ports), so
    the dashboard could not start."""
    held = _bound(host, port, what, fix)
    held.listen(1)
    return held


def _bound(host: str, port: int, what: str, fix: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    probe = socket.socket(family, socket.SOCK_STREAM)
    # As a server binds: a port left in TIME_WAIT by a stopped server is free.
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, port))
    except OSError as error:
        probe.close()
        shown = f"[{host}]" if ":" in host else host
        reason = error.strerror or str(error)
        raise Fail(f"port {port} on {shown} is taken ({reason}): another program listens "
                   f"there, so {what} cannot; {fix}") from None
    return probe
