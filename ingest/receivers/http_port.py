"""What the OTLP/HTTP port's parts (http_server.py, http_exchange.py, http_admission.py) use of
the receiver that owns them (http_receiver.HttpReceiver): a Protocol, since they cannot import
the receiver, which imports them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from tornado.ioloop import IOLoop

from ingest.receivers.auth import BearerToken, FailedTokens
from ingest.receivers.connection_guards import ConnectionTable, Lingering, ReceivingBytes
from ingest.receivers.host_check import HostPolicy
from ingest.receivers.http_routes import Endpoint, Head, Reply
from ingest.receivers.limits import Limits


class Port(Protocol):
    token: BearerToken
    limits: Limits
    failed_tokens: FailedTokens
    hosts: HostPolicy
    stopping: bool
    routes: dict[str, Endpoint]
    connections: ConnectionTable
    receiving: ReceivingBytes
    lingering: Lingering
    in_progress: int
    export_pool: ThreadPoolExecutor
    page_pool: ThreadPoolExecutor
    io_loop: IOLoop | None

    def count_refusal(self, head: Head, reply: Reply) -> None: ...
