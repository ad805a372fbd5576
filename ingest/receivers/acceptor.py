"""The OTLP/HTTP port's accept loop, which backs off when the process has no descriptor left.

Tornado's own (tornado.netutil.add_accept_handler) lets accept()'s OSError out of its handler:
at the descriptor limit every turn of the loop found the listening socket ready, accept()
failed with EMFILE, and the loop logged a traceback and tried again at once (244 MB of log in
30 s, the process at 100% of a core). Here, when accept() fails for lack of a resource, the
socket is left alone for BACK_OFF_SECONDS (the waiting clients stay in the kernel's backlog)
and one line is logged per period at most, with how many times it happened
(log_pace.py). Any other accept() error is handled the same way: never a loop that spins.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable
from typing import Any

from tornado.ioloop import IOLoop

from ingest.receivers.log_pace import LogPace

_LOG = logging.getLogger(__name__)
BACK_OFF_SECONDS = 1.0
# Connections taken per turn of the loop, as tornado does (its _DEFAULT_BACKLOG).
_PER_TURN = 128
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Acceptor:
    """Accepts on `sock` (listening, non-blocking) on `io_loop`'s thread; `on_connection` gets
    each new (socket, address)."""

    def __init__(self, sock: socket.socket, io_loop: IOLoop,
                 on_connection: Callable[[socket.socket, Any], None], name: str,
                 pace: LogPace | None = None) -> None:
        self.sock = sock
        self.io_loop = io_loop
        self.on_connection = on_connection
        self.name = name
        self.pace = pace or LogPace()
        self.failures = 0  # accept() calls that failed and made the loop back off
        self._listening = False
        self._stopped = False
        self._timer: object | None = None

    def start(self) -> None:
        self._listen()

    def stop(self) -> None:
        """Stop accepting (on the loop's thread)."""
        self._stopped = True
        if self._timer is not None:
            self.io_loop.remove_timeout(self._timer)
            self._timer = None
        self._unlisten()

    def _listen(self) -> None:
        if not self._listening and not self._stopped:
            self.io_loop.add_handler(self.sock, self._ready, IOLoop.READ)
            self._listening = True

    def _unlisten(self) -> None:
        if self._listening:
            self.io_loop.remove_handler(self.sock)
            self._listening = False

    def _ready(self, fd: object, events: int) -> None:
        for _ in range(_PER_TURN):
            if self._stopped:
                return
            try:
                connection, address = self.sock.accept()
            except BlockingIOError:
                return  # nothing more waiting
            except ConnectionAbortedError:
                continue  # the client gave up before we took it: the next one
            except OSError as error:
                self._back_off(error)
                return
            self.on_connection(connection, address)

    def _back_off(self, error: OSError) -> None:
        self.failures += 1
        self._unlisten()
        self._timer = self.io_loop.call_later(BACK_OFF_SECONDS, self._resume)
        times = self.pace.due(("accept", self.name, error.errno))
        if times:
            why = ("the process has no file descriptor left" if error.errno in _OUT_OF_RESOURCES
                   else "accept() failed")
            _LOG.warning("%s: %s (%s); new connections wait in the backlog, accepted again "
                         "every %g s (%d time(s) since the last such line)", self.name, why,
                         error.strerror or error, BACK_OFF_SECONDS, times,
                         extra={"event": "accept_failed", "listener": self.name,
                                "errno": error.errno, "times": times})

    def _resume(self) -> None:
        self._timer = None
        self._listen()
