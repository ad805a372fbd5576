"""Tornado's HTTP/1.1 server for the OTLP/HTTP port, with its connection limits (LimitedServer):
our accept loop, which backs off when descriptors run out (acceptor.py); open connections
capped, idle ones making room at the cap and a new one refused only when every one is busy
with a request (connection_guards.py); the head within the idle timeout; each request handed
to an exchange (http_exchange.py)."""

from __future__ import annotations

import asyncio
import socket

from tornado import httputil
from tornado.httpserver import HTTPServer
from tornado.ioloop import IOLoop
from tornado.iostream import IOStream

from ingest.receivers.acceptor import Acceptor
from ingest.receivers.connection_guards import REFUSED_CONNECTION
from ingest.receivers.http_exchange import Exchange
from ingest.receivers.http_port import Port

_MAX_HEAD_BYTES = 64 * 1024


class LimitedServer(HTTPServer):
    # HTTPServer is a tornado Configurable: its constructor's arguments go to initialize().
    def initialize(self, receiver: Port) -> None:  # type: ignore[override]
        self.receiver = receiver
        limits = receiver.limits
        super().initialize(
            lambda request: None,  # unused: start_request below answers every request
            idle_connection_timeout=limits.socket_timeout,  # the head's timeout too
            max_header_size=_MAX_HEAD_BYTES,
            max_body_size=limits.max_body_bytes,
            # Reads of up to 256 KiB: a 125 KiB request is one read instead of two. With 64 KiB
            # bench_receivers (16 exporters, same run, against the stdlib receiver, a machine
            # at load 13 on 2 cores) gave x0.54-x0.87 of its spans/s; with 256 KiB x0.91-x1.18.
            chunk_size=256 * 1024,
        )

    def add_sockets(self, sockets: list[socket.socket]) -> None:
        """Our accept loop rather than tornado's, which spins on EMFILE (acceptor.py)."""
        self.acceptors = [Acceptor(sock, IOLoop.current(), self._accepted, "OTLP/HTTP")
                          for sock in sockets]
        for acceptor in self.acceptors:
            acceptor.start()

    def _accepted(self, connection: socket.socket, address: tuple) -> None:
        # What tornado's TCPServer does with a new connection, TLS aside (none here).
        self.handle_stream(IOStream(connection, max_buffer_size=self.max_buffer_size,
                                    read_chunk_size=self.read_chunk_size), address)

    def stop(self) -> None:
        for acceptor in getattr(self, "acceptors", []):
            acceptor.stop()
            acceptor.sock.close()
        super().stop()

    def handle_stream(self, stream: IOStream, address: tuple) -> None:
        receiver = self.receiver
        if receiver.stopping:
            stream.close()
            return
        if not receiver.connections.make_room():
            # Every connection is busy with a request: answered at once, not queued.
            asyncio.ensure_future(receiver.lingering.answer_and_linger(
                stream, REFUSED_CONNECTION))
            return
        receiver.connections.waiting(stream)
        super().handle_stream(stream, address)

    def start_request(self, server_conn: object,
                      request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        return Exchange(self.receiver, server_conn.stream, request_conn)  # type: ignore[attr-defined]

    def on_close(self, server_conn: object) -> None:
        self.receiver.connections.closed(server_conn.stream)  # type: ignore[attr-defined]
        super().on_close(server_conn)  # type: ignore[arg-type]

