"""`budgetscope serve`: OTLP/HTTP, OTLP/gRPC and the dashboard in the one process that owns the
database file (DESIGN.md, "Storage and concurrency").

Threads: the receivers and the group-commit writer run in the background; the main thread runs
Streamlit's server (it wants the main thread for its event loop and signal handlers), or, with
--no-ui, just waits for a signal. On SIGTERM or Ctrl-C the receivers stop accepting, in-flight
requests finish (each is answered only after its commit), the writer drains, the database is
closed (checkpointed) and the sidecar announcing the server is removed.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import socket
import sys
import threading
from types import FrameType

import click
import duckdb

from budgetscope.commands.common import Fail, refuse_trace_file, window_label
from budgetscope.commands.dashboard import (
    access_options,
    access_policy,
    refresh_option,
    refuse_open_exposure,
    run_dashboard,
)
from budgetscope.commands.durations import Duration
from budgetscope.commands.serve_operations import (
    retention_families,
    signal_families,
)
from budgetscope.commands.served_cli import RefusedCommand, ServedCommands
from budgetscope.commands.tokens import token_option
from budgetscope.log_format import configure_logging
from dashboard.config import DashboardConfig
from dashboard.server.bootstrap import DashboardServer
from ingest.receivers.auth import FailedTokens
from ingest.receivers.budgets_endpoint import PATH as BUDGETS_PATH
from ingest.receivers.budgets_endpoint import BudgetsEndpoint
from ingest.receivers.cli_endpoint import PATH as CLI_PATH
from ingest.receivers.cli_endpoint import CliEndpoint
from ingest.receivers.limits import DEFAULT_MAX_BODY_BYTES, Limits
from ingest.receivers.operations import OperatorPages
from ingest.receivers.service import ReceiverConfig, Receivers
from store import (
    DatabaseBusy,
    DatabaseOwner,
    DeclaredBudgets,
    MemoryLimitError,
    RetentionSchedule,
    SchemaError,
    Source,
)

# Seconds SIGTERM waits for in-flight requests; exporters retry what is cut off after that.
DRAIN_SECONDS = 30.0
# The longest one command of the read API runs (its queries are interrupted after that).
READ_API_SECONDS = 120.0
_WILDCARDS = ("0.0.0.0", "::", "")
_LOG = logging.getLogger("budgetscope.serve")


def _local_host(host: str) -> str:
    """The address a local client uses to reach a server listening on `host`."""
    return "127.0.0.1" if host in _WILDCARDS else host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _wait_for_signal() -> None:
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    # A timed wait, so that the main thread gets to run the Python-level signal handler.
    while not stop.wait(0.5):
        pass


def _check_port_free(host: str, port: int) -> None:
    """Refuse to start when the dashboard port is taken, before the database is opened:
    Streamlit would only find out after the receivers were already listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise Fail(f"cannot serve the dashboard on {host}:{port} ({error.strerror}); "
                       "choose another --ui-port, or --no-ui") from None


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 accepts other machines.")
@click.option("--otlp-http-port", default=4318, show_default=True, type=click.IntRange(0, 65535),
              help="OTLP/HTTP port (POST /v1/traces and /v1/logs); 0 picks a free one.")
@click.option("--otlp-grpc-port", default=4317, show_default=True, type=click.IntRange(0, 65535),
              help="OTLP/gRPC port; 0 picks a free one.")
@click.option("--ui-port", default=8501, show_default=True, type=click.IntRange(1, 65535),
              help="Dashboard port.")
@click.option("--no-ui", is_flag=True, help="Run the receivers only, without the dashboard.")
@token_option("Require `Authorization: Bearer TOKEN` on every export and /metrics, and the "
              "token on the dashboard")
@access_options
@click.option("--max-body-bytes", default=DEFAULT_MAX_BODY_BYTES, show_default=True,
              type=click.IntRange(1024), help="Largest request accepted, after decompression.")
@refresh_option
@click.option("--retention-days", type=click.FloatRange(0, min_open=True), default=None,
              help="Remove traces whose newest span ended more than this many days ago, whole, "
                   "in the background (default: keep everything).")
@click.option("--retention-interval", type=Duration(), default="1h", show_default=True,
              help="How often retention runs (the first pass runs at start-up).")
@click.option("--metrics-window", type=Duration(), default="1h", show_default=True,
              help="/metrics reports exhaustion, give-ups, upstream failures, reconciliation "
                   "and orphan writes over the runs that started this long ago or later.")
@click.option("--metrics-cache-seconds", type=click.FloatRange(0), default=5.0,
              show_default=True, help="How long /metrics reuses those figures.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Log lines on standard error: text, or one JSON object "
              "per line (start-up, rejections, retention, shutdown).")
@click.option("--memory-limit", default="512MB", show_default=True,
              help="DuckDB's own memory (block cache, query state) for the writer and the "
                   "dashboard's queries; the process adds its Python and Streamlit memory.")
@click.option("--root-grace", type=Duration(zero=True), default="5m", show_default=True,
              help="A trace whose root span has not arrived is measured from its earliest span "
                   "once none of its spans has arrived for this long (a root that comes later "
                   "replaces that run).")
@click.pass_context
def serve_command(context: click.Context, host: str, otlp_http_port: int, otlp_grpc_port: int,
                  ui_port: int, no_ui: bool, token: str | None,
                  allowed_hosts: tuple[str, ...], insecure_no_auth: bool, max_body_bytes: int,
                  refresh_seconds: float, retention_days: float | None,
                  retention_interval: dt.timedelta, metrics_window: dt.timedelta,
                  metrics_cache_seconds: float, log_format: str, memory_limit: str,
                  root_grace: dt.timedelta) -> None:
    """Receive OTLP traces (HTTP and gRPC) and serve the dashboard, in one process that owns
    the database. SIGTERM or Ctrl-C stops it with every acknowledged span stored.

    The OTLP/HTTP port also answers GET /healthz, /readyz and /metrics (Prometheus), and
    /budgets, where `budgetscope budgets` sends its commands while this server holds the file,
    and /cli, where report, run, check and simulate are answered (same token as exports)."""
    db = context.obj["db"]
    refuse_open_exposure(host, token, insecure_no_auth,
                         "send spans" + ("" if no_ui else " and read the dashboard"))
    configure_logging(log_format)
    # One Host/Origin policy for the dashboard and the OTLP/HTTP port's data routes, and one
    # count of wrong tokens per client for both ports and the dashboard.
    failed_tokens = FailedTokens()
    access = access_policy(host, ui_port, token, allowed_hosts, failed_tokens)
    if not no_ui:
        _check_port_free(host, ui_port)
    refuse_trace_file(db)
    try:
        owner = DatabaseOwner(db, memory_limit=memory_limit)
    except (DatabaseBusy, SchemaError, MemoryLimitError) as error:
        raise Fail(str(error)) from None
    except duckdb.Error as error:
        raise Fail(f"cannot open database {db}: {error}") from None
    config = ReceiverConfig(host=host, http_port=otlp_http_port, grpc_port=otlp_grpc_port,
                            token=token, limits=Limits(max_body_bytes=max_body_bytes),
                            hosts=access, failed_tokens=failed_tokens,
                            root_grace_seconds=root_grace.total_seconds())
    try:
        # Runs and steps of the traces each transaction touched are derived by the writer
        # thread right after, when idle or every second (store/derive/scheduling.py).
        receivers = Receivers(owner, config, derive=True)
    except OSError as error:
        owner.close()
        raise Fail(str(error)) from None
    retention = None
    if retention_days is not None:
        retention = RetentionSchedule(receivers.committer.run_in_writer, retention_days, db,
                                      interval=retention_interval.total_seconds())
    sources = [signal_families(owner, metrics_window)]
    if retention is not None:
        sources.append(retention_families(retention))
    pages = OperatorPages(receivers.committer, receivers.exporter.counters,
                          receivers.http.token, sources=sources,
                          cache_seconds=metrics_cache_seconds)
    receivers.http.pages.update(pages.pages())
    # `budgetscope budgets` while this process holds the file: carried out here (SPEC §10).
    budgets = DeclaredBudgets(owner, receivers.committer)
    receivers.http.add_route(BUDGETS_PATH, BudgetsEndpoint(budgets, receivers.http.token))
    # `report`, `run`, `check` and `simulate` while this process holds the file: run here, on
    # the owner's reader, for the CLI (its read API).
    commands = ServedCommands(owner, seconds=READ_API_SECONDS)
    receivers.http.add_route(CLI_PATH, CliEndpoint(commands.run, RefusedCommand,
                                                   receivers.http.token))
    receivers.start()
    if retention is not None:
        retention.start()
    local = _url_host(_local_host(host))
    dashboard = None if no_ui else f"http://{local}:{ui_port}"
    owner.announce({
        "command": "budgetscope serve", "host": host,
        "http_port": receivers.http.port, "grpc_port": receivers.grpc.port,
        "ui_port": None if no_ui else ui_port,
        "otlp_http": f"http://{local}:{receivers.http.port}/v1/traces",
        "otlp_http_logs": f"http://{local}:{receivers.http.port}/v1/logs",
        "otlp_grpc": f"{local}:{receivers.grpc.port}",
        "dashboard": dashboard,
        "budgets": f"http://{local}:{receivers.http.port}{BUDGETS_PATH}",
        "cli": f"http://{local}:{receivers.http.port}{CLI_PATH}",
    })
    # The dashboard this process runs reads through the owner and edits through the writer.
    dashboard_config = DashboardConfig(
        Source(db=db, owner=owner), refresh_seconds=refresh_seconds, editor=budgets,
        endpoints=(f"http://{local}:{receivers.http.port}/v1/traces",
                   f"{local}:{receivers.grpc.port}"))
    _say_where(db, host, local, receivers, dashboard, token is not None)
    _LOG.info("serving %s", db, extra={
        "event": "start", "pid": os.getpid(), "db": db, "host": host,
        "otlp_http": f"http://{local}:{receivers.http.port}/v1/traces",
        "otlp_http_logs": f"http://{local}:{receivers.http.port}/v1/logs",
        "otlp_grpc": f"{local}:{receivers.grpc.port}", "dashboard": dashboard,
        "health": f"http://{local}:{receivers.http.port}/healthz",
        "metrics": f"http://{local}:{receivers.http.port}/metrics",
        "token_required": token is not None, "retention_days": retention_days,
        "metrics_window": window_label(metrics_window)})
    try:
        if no_ui:
            _wait_for_signal()
        else:
            run_dashboard(DashboardServer(host, ui_port, access), dashboard_config)
    finally:
        stats = receivers.committer.stats
        written_before = stats.spans_written
        queued = receivers.committer.queued_spans
        _LOG.info("stopping; finishing in-flight requests (%d spans queued)", queued,
                  extra={"event": "stopping", "spans_queued": queued})
        if retention is not None:
            retention.stop()  # between two slices; a slice is one transaction
        drained = receivers.stop(DRAIN_SECONDS)
        owner.close()
        _LOG.info("stopped; %s spans stored in %s transactions (%s committed while draining); "
                  "%s closed%s", f"{stats.spans_inserted:,}", f"{stats.transactions:,}",
                  f"{stats.spans_written - written_before:,}", db,
                  "" if drained else "; some requests were cut off unanswered (their "
                  "exporters retry them)",
                  extra={"event": "stop", "spans_stored": stats.spans_inserted,
                         "transactions": stats.transactions,
                         "spans_drained": stats.spans_written - written_before,
                         "drained": drained, "db": db})


def _say_where(db: str, host: str, local: str, receivers: Receivers, dashboard: str | None,
               token: bool) -> None:
    lines = [
        f"budgetscope serve (pid {os.getpid()}) owns {db}",
        f"  OTLP/HTTP  http://{local}:{receivers.http.port}/v1/traces "
        f"(logs: http://{local}:{receivers.http.port}/v1/logs)",
        f"  OTLP/gRPC  {local}:{receivers.grpc.port}",
        f"  dashboard  {dashboard or 'off (--no-ui)'}",
    ]
    if host in ("127.0.0.1", "localhost", "::1"):
        lines.append(f"listening on {host} only: other machines cannot connect "
                     "(--host 0.0.0.0 to accept them)")
    else:
        lines.append(f"listening on {host}: reachable from other machines")
    lines.append("bearer token required on exports and /metrics; the dashboard asks for it "
                 "once (open it as …/?token=YOUR_TOKEN, a cookie keeps you in)" if token else
                 "no token: anyone who can connect may send spans and open the dashboard "
                 "(--token to require one)")
    click.echo("\n".join(lines))
    sys.stdout.flush()
