"""Both receivers and the writer behind them, started and stopped together.

The OTLP/HTTP port serves the exports; what else it serves is the caller's, handed in as
configuration (`ReceiverConfig.routes`): a function of the parts a route may use
(`ReceiverParts`: the writer, the counters, the token) that returns path → Endpoint
(http_routes.py). `budgetscope serve` hands its operator pages, /budgets, /prices and /cli so
(budgetscope/server/compose.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ingest.receivers.auth import BearerToken
from ingest.receivers.counters import ReceiverCounters
from ingest.receivers.grpc_receiver import GrpcReceiver
from ingest.receivers.host_check import HostPolicy
from ingest.receivers.http_receiver import HttpReceiver
from ingest.receivers.http_routes import Endpoint
from ingest.receivers.limits import Limits
from ingest.receivers.span_intake import SpanIntake
from store import DERIVE, ROOT_GRACE_SECONDS, DatabaseOwner, GroupCommitter


@dataclass(frozen=True)
class ReceiverParts:
    """What a route served beside the exports may use of the receivers."""

    writer: GroupCommitter  # the single group-commit writer every span is committed through
    counters: ReceiverCounters  # what both receivers counted (/metrics reads them)
    token: BearerToken  # the bearer token the exports take, for routes that show data


# The routes served beside the exports on the OTLP/HTTP port, made from the receivers' parts.
Routes = Callable[[ReceiverParts], Mapping[str, Endpoint]]


@dataclass(frozen=True)
class ReceiverConfig:
    host: str = "127.0.0.1"
    http_port: int = 4318  # 0 picks a free port (tests)
    grpc_port: int = 4317
    token: str | None = None
    limits: Limits = field(default_factory=Limits)
    # Host and Origin the data routes answer (host_check.py); None: loopback and `host` only.
    hosts: HostPolicy | None = None
    # Back-pressure of the group-commit writer (see store/write/commit_queue.py).
    max_queued_spans: int = 200_000
    max_lag_seconds: float = 5.0
    # docs/conventions.md: how long a trace whose root has not arrived waits before it is measured
    # from its earliest span (serve --root-grace).
    root_grace_seconds: float = ROOT_GRACE_SECONDS
    # More routes on the OTLP/HTTP port (serve's pages, /budgets, /prices, /cli); None: the
    # exports alone.
    routes: Routes | None = None


class Receivers:
    """OTLP/HTTP and OTLP/gRPC in front of one group-commit writer on the owner's database."""

    def __init__(self, owner: DatabaseOwner, config: ReceiverConfig, *,
                 derive: bool = False) -> None:
        """With `derive`, the writer derives runs and steps after its commits (as serve does:
        store/derive/scheduling.py, triggers 1-3)."""
        self.config = config
        self.committer = GroupCommitter(
            owner.cursor(), derive=DERIVE if derive else None,
            max_queued_spans=config.max_queued_spans,
            max_lag_seconds=config.max_lag_seconds,
            root_grace_seconds=config.root_grace_seconds if derive else None)
        self.traces = traces = SpanIntake(self.committer, config.limits.commit_timeout)
        # What both receivers counted: requests, spans and log records, refusals.
        self.counters = traces.counters
        self.token = token = BearerToken(config.token)
        self.parts = ReceiverParts(self.committer, traces.counters, token)
        try:
            routes = config.routes(self.parts) if config.routes is not None else {}
        except BaseException:
            self.committer.close()
            raise
        try:
            # Each port keeps its own count of wrong tokens (auth.py): a guesser at one never
            # holds back the other.
            self.http = HttpReceiver(traces, config.host, config.http_port, token=token,
                                     limits=config.limits, hosts=config.hosts, routes=routes)
        except OSError as error:
            self.committer.close()
            raise OSError(f"cannot listen for OTLP/HTTP on {config.host}:{config.http_port} "
                          f"({error.strerror or error})") from None
        except BaseException:  # a route on an export's path (ValueError)
            self.committer.close()
            raise
        try:
            self.grpc = GrpcReceiver(traces, config.host, config.grpc_port, token=token,
                                     limits=config.limits)
        except OSError:
            self.http.stop(0)  # never started: its port is closed at once
            self.committer.close()
            raise
        # Where the ports listen (port 0 in the configuration picks a free one), as an
        # exporter is given them: the traces URL over HTTP, host:port over gRPC.
        self.http_port, self.grpc_port = self.http.port, self.grpc.port
        self.http_endpoint, self.grpc_endpoint = self.http.endpoint, self.grpc.endpoint

    def start(self) -> None:
        self.http.start()
        self.grpc.start()

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop accepting on both, finish in-flight requests, commit everything queued.

        Every request answered with success was committed before its answer, so once this
        returns the database holds every acknowledged span. True when all finished in time."""
        deadline = time.monotonic() + timeout
        self.grpc.stop(timeout)
        self.http.stop(timeout)
        # up to the drain's `timeout`, 5 s more for it to finish and 5 for the loop to end
        http_drained = self.http.join(timeout + 10) and bool(self.http.drained)
        grpc_drained = self.grpc.join(max(0.0, deadline - time.monotonic()) + 1)
        writer_drained = self.committer.close(max(0.0, deadline - time.monotonic()) + 5)
        return http_drained and grpc_drained and writer_drained
