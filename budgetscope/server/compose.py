"""`Server`: the parts of `budgetscope serve` on one database owner, wired, started and stopped
(docs/design.md, "Who owns the database").

The OTLP/HTTP port serves what ingest receives (the exports) and what this server adds beside
them, handed to the receivers as configuration (`ReceiverConfig.routes`): the operator pages
(operations.py), /budgets and /prices (budgets_endpoint.py, prices_endpoint.py) and the read
API (cli_endpoint.py, read_api.py).

Threads: the receivers and the group-commit writer run in the background (retention too, with
--retention-days); the caller's thread runs the dashboard or waits for a signal. `stop()`: the
receivers stop accepting, in-flight requests finish (each is answered only after its commit),
the writer drains, the database is closed (checkpointed) and the sidecar announcing the server
is removed.

Two HTTP servers run in this process: the OTLP/HTTP port on Tornado (ingest/receivers/
http_receiver.py) and the dashboard on the uvicorn/Starlette server Streamlit brings. Why the
OTLP/HTTP port does not move onto the second: docs/design.md, "Two HTTP servers".
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import click
import duckdb

from budgetscope.durations import window_label
from budgetscope.fail import Fail, refuse_trace_file
from budgetscope.server import descriptors
from budgetscope.server.budgets_endpoint import PATH as BUDGETS_PATH
from budgetscope.server.budgets_endpoint import BudgetsEndpoint
from budgetscope.server.cli_endpoint import PATH as CLI_PATH
from budgetscope.server.cli_endpoint import CliEndpoint
from budgetscope.server.metrics import retention_families, signal_families
from budgetscope.server.operations import OperatorPages
from budgetscope.server.prices_endpoint import PATH as PRICES_PATH
from budgetscope.server.prices_endpoint import PricesEndpoint
from budgetscope.server.read_api import ServedCommands
from dashboard.config import DashboardConfig
from dashboard.server.access import AccessPolicy
from dashboard.server.connections import DEFAULT_MAX_CONNECTIONS, ConnectionLimits
from ingest.receivers.http_routes import Endpoint
from ingest.receivers.limits import Limits
from ingest.receivers.service import ReceiverConfig, ReceiverParts, Receivers
from store import (
    DatabaseBusy,
    DatabaseOwner,
    DeclaredBudgets,
    DeclaredPrices,
    MemoryLimitError,
    RetentionSchedule,
    SchemaError,
    Source,
)

# Seconds SIGTERM waits for in-flight requests; exporters retry what is cut off after that.
DRAIN_SECONDS = 30.0
# Seconds the stop waits for retention's slice in progress (one transaction) before draining.
RETENTION_STOP_SECONDS = 10.0
# The longest one command of the read API runs (its queries are interrupted after that).
READ_API_SECONDS = 120.0
_WILDCARDS = ("0.0.0.0", "::", "")
_LOG = logging.getLogger("budgetscope.serve")


def local_host(host: str) -> str:
    """The address a local client uses to reach a server listening on `host`."""
    return "127.0.0.1" if host in _WILDCARDS else host


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class ServeOptions:
    """What `budgetscope serve` was asked for (its options, and the click group /cli runs)."""

    db: str
    host: str
    http_port: int
    grpc_port: int
    ui_port: int | None  # None: --no-ui
    token: str | None
    # One Host/Origin policy for the dashboard and the OTLP/HTTP port's data routes (each
    # surface counts wrong tokens on its own: ingest/receivers/auth.py).
    access: AccessPolicy
    max_body_bytes: int
    refresh_seconds: float
    retention_days: float | None
    retention_interval: dt.timedelta
    metrics_window: dt.timedelta
    metrics_cache_seconds: float
    memory_limit: str
    root_grace: dt.timedelta
    commands: click.Group


class Server:
    """serve's parts on one owner of `options.db`; raises Fail when the file or a port cannot
    be had (nothing is left open then)."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        db = options.db
        refuse_trace_file(db)
        # The soft descriptor limit raised, and each port's share of it (descriptors.py).
        defaults = Limits()
        self.descriptors = descriptors.of_this_process(
            dashboard=options.ui_port is not None, otlp_http_default=defaults.max_connections,
            otlp_grpc_default=defaults.max_grpc_connections,
            dashboard_default=DEFAULT_MAX_CONNECTIONS)
        existed = Path(db).exists()
        try:
            self.owner = owner = DatabaseOwner(db, memory_limit=options.memory_limit)
        except (DatabaseBusy, SchemaError, MemoryLimitError) as error:
            raise Fail(str(error)) from None
        except duckdb.Error as error:
            raise Fail(f"cannot open database {db}: {error}") from None
        config = ReceiverConfig(host=options.host, http_port=options.http_port,
                                grpc_port=options.grpc_port, token=options.token,
                                limits=Limits(
                                    max_body_bytes=options.max_body_bytes,
                                    max_connections=self.descriptors.otlp_http,
                                    max_grpc_connections=self.descriptors.otlp_grpc),
                                hosts=options.access,
                                root_grace_seconds=options.root_grace.total_seconds(),
                                routes=self._served_routes)
        try:
            # Runs and steps of the traces each transaction touched are derived by the writer
            # thread right after, when idle or every second (store/derive/scheduling.py).
            self.receivers = Receivers(owner, config, derive=True)
        except OSError as error:
            owner.close()
            if not existed:  # a file this start made and nothing was stored in: not left
                for made in (Path(db), Path(f"{db}.wal")):
                    made.unlink(missing_ok=True)
            raise Fail(str(error)) from None

    def _served_routes(self, parts: ReceiverParts) -> dict[str, Endpoint]:
        """What this server serves beside the exports on the OTLP/HTTP port, made by the
        receivers once their writer exists (ReceiverConfig.routes); retention, the declared
        budgets and prices, which use the writer too, are made and kept here with them."""
        options, owner, writer = self.options, self.owner, parts.writer
        self.retention = None
        if options.retention_days is not None:
            self.retention = RetentionSchedule(
                writer.run_in_writer, options.retention_days, options.db,
                interval=options.retention_interval.total_seconds())
        sources = [signal_families(owner, options.metrics_window)]
        if self.retention is not None:
            sources.append(retention_families(self.retention))
        pages = OperatorPages(writer, parts.counters, parts.token, sources=sources,
                              cache_seconds=options.metrics_cache_seconds)
        # `budgetscope budgets` while this process holds the file: carried out here
        # (docs/guide.md#declaring-budgets), and by the dashboard's budgets page (its editor).
        self.budgets = DeclaredBudgets(owner, writer)
        # `budgetscope prices` likewise (docs/metrics.md §11.3), and the dashboard's prices page
        self.prices = DeclaredPrices(owner, writer)
        # `report`, `run`, `check` and `simulate` while this process holds the file: run here,
        # on the owner's reader, for the CLI (its read API).
        commands = ServedCommands(owner, group=options.commands, seconds=READ_API_SECONDS,
                                  db=os.path.abspath(options.db),
                                  dashboard_url=self.dashboard_url)
        return {
            **pages.routes(),
            BUDGETS_PATH: BudgetsEndpoint(self.budgets, parts.token),
            PRICES_PATH: PricesEndpoint(self.prices, parts.token),
            CLI_PATH: CliEndpoint(commands, parts.token),
        }

    @property
    def local(self) -> str:
        """This server's host as a URL's host, for a client on this machine."""
        return url_host(local_host(self.options.host))

    @property
    def dashboard_url(self) -> str | None:
        ui_port = self.options.ui_port
        return None if ui_port is None else f"http://{self.local}:{ui_port}"

    def endpoint(self, path: str) -> str:
        return f"http://{self.local}:{self.receivers.http_port}{path}"

    @property
    def grpc_endpoint(self) -> str:
        return f"{self.local}:{self.receivers.grpc_port}"

    def start(self) -> None:
        """Start receiving (and retention), and announce the server beside the file."""
        self.receivers.start()
        if self.retention is not None:
            self.retention.start()
        self.owner.announce({
            "command": "budgetscope serve", "host": self.options.host,
            "http_port": self.receivers.http_port, "grpc_port": self.receivers.grpc_port,
            "ui_port": self.options.ui_port,
            "otlp_http": self.endpoint("/v1/traces"),
            "otlp_http_logs": self.endpoint("/v1/logs"),
            "otlp_grpc": self.grpc_endpoint,
            "dashboard": self.dashboard_url,
            "budgets": self.endpoint(BUDGETS_PATH),
            "prices": self.endpoint(PRICES_PATH),
            "cli": self.endpoint(CLI_PATH),
        })

    @property
    def dashboard_connections(self) -> ConnectionLimits:
        """The dashboard's connection cap: its share of the descriptors."""
        return ConnectionLimits(max_connections=self.descriptors.dashboard)

    def dashboard_config(self) -> DashboardConfig:
        """The dashboard this process runs reads through the owner and edits through the
        writer."""
        return DashboardConfig(Source(db=self.options.db, owner=self.owner),
                               refresh_seconds=self.options.refresh_seconds,
                               editor=self.budgets, prices=self.prices,
                               endpoints=(self.endpoint("/v1/traces"), self.grpc_endpoint))

    def log_serving(self) -> None:
        options = self.options
        _LOG.info("serving %s", options.db, extra={
            "event": "start", "pid": os.getpid(), "db": options.db, "host": options.host,
            "otlp_http": self.endpoint("/v1/traces"),
            "otlp_http_logs": self.endpoint("/v1/logs"),
            "otlp_grpc": self.grpc_endpoint, "dashboard": self.dashboard_url,
            "health": self.endpoint("/healthz"),
            "metrics": self.endpoint("/metrics"),
            "token_required": options.token is not None,
            "retention_days": options.retention_days,
            "metrics_window": window_label(options.metrics_window),
            **self.descriptors.describe()})

    def stop(self) -> None:
        """Drain and close: every acknowledged span is stored once this returns."""
        stats = self.receivers.committer.stats
        written_before = stats.spans_written
        queued = self.receivers.committer.queued_spans
        _LOG.info("stopping; finishing in-flight requests (%d spans queued)", queued,
                  extra={"event": "stopping", "spans_queued": queued})
        if self.retention is not None:
            self.retention.stop()  # between two slices; a slice is one transaction
            self.retention.join(RETENTION_STOP_SECONDS)
        drained = self.receivers.stop(DRAIN_SECONDS)
        self.owner.close()
        db = self.options.db
        _LOG.info("stopped; %s spans stored in %s transactions (%s committed while draining); "
                  "%s closed%s", f"{stats.spans_inserted:,}", f"{stats.transactions:,}",
                  f"{stats.spans_written - written_before:,}", db,
                  "" if drained else "; some requests were cut off unanswered (their "
                  "exporters retry them)",
                  extra={"event": "stop", "spans_stored": stats.spans_inserted,
                         "transactions": stats.transactions,
                         "spans_drained": stats.spans_written - written_before,
                         "drained": drained, "db": db})
