"""`budgetscope serve`: OTLP/HTTP, OTLP/gRPC and the dashboard in the one process that owns the
database file (docs/design.md, "Who owns the database").

This command parses the options and says where the server listens; what runs, and how it
stops, is budgetscope/server/compose.py. The main thread runs the dashboard's server (it wants
the main thread for its event loop and signal handlers: dashboard/server/bootstrap.py), or,
with --no-ui, just waits for a signal. On SIGTERM or Ctrl-C the server drains and closes.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys
import threading
from types import FrameType

import click

from budgetscope.commands.dashboard import (
    access_options,
    access_policy,
    refresh_option,
    refuse_open_exposure,
    run_dashboard,
)
from budgetscope.commands.ports import hold_port, require_free
from budgetscope.commands.tokens import token_option
from budgetscope.durations import Duration
from budgetscope.log_format import configure_logging, pace_client_logs
from budgetscope.server.compose import ServeOptions, Server
from dashboard.server.bootstrap import DashboardServer
from ingest.receivers.limits import DEFAULT_MAX_BODY_BYTES


def _wait_for_signal() -> None:
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    # A timed wait, so that the main thread gets to run the Python-level signal handler.
    while not stop.wait(0.5):
        pass


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
    pace_client_logs()
    # One Host/Origin policy for the dashboard and the OTLP/HTTP port's data routes; each
    # surface counts wrong tokens on its own (the dashboard's here, each port its own).
    access = access_policy(host, ui_port, token, allowed_hosts)
    # Every port before the database is opened: a taken one is said before any address is
    # printed, no file is created, and no server library logs its own failure.
    require_free(host, otlp_http_port, "the OTLP/HTTP receiver",
                 "choose another with --otlp-http-port N (0 picks a free one)")
    require_free(host, otlp_grpc_port, "the OTLP/gRPC receiver",
                 "choose another with --otlp-grpc-port N (0 picks a free one)")
    # The dashboard binds its port last, after the receivers: held until then, so that a
    # receiver on port 0 is never given it.
    held = None if no_ui else hold_port(host, ui_port, "the dashboard",
                                        "choose another with --ui-port N, or --no-ui")
    try:
        server = Server(ServeOptions(
            db=db, host=host, http_port=otlp_http_port, grpc_port=otlp_grpc_port,
            ui_port=None if no_ui else ui_port, token=token, access=access,
            max_body_bytes=max_body_bytes,
            refresh_seconds=refresh_seconds, retention_days=retention_days,
            retention_interval=retention_interval, metrics_window=metrics_window,
            metrics_cache_seconds=metrics_cache_seconds, memory_limit=memory_limit,
            root_grace=root_grace, commands=_root_group(context)))
        server.start()
        _say_where(server, token is not None)
        server.log_serving()
        try:
            if held is None:  # --no-ui
                _wait_for_signal()
            else:
                held.close()
                run_dashboard(DashboardServer(host, ui_port, access,
                                              connections=server.dashboard_connections),
                              server.dashboard_config())
        finally:
            server.stop()
    finally:
        if held is not None:
            held.close()


def _root_group(context: click.Context) -> click.Group:
    """The `budgetscope` group this command runs under: the commands /cli runs for a client."""
    root = context.find_root().command
    if not isinstance(root, click.Group):
        raise click.UsageError("serve runs under the budgetscope command group")
    return root


def _say_where(server: Server, token: bool) -> None:
    host = server.options.host
    lines = [
        f"budgetscope serve (pid {os.getpid()}) owns {server.options.db}",
        f"  OTLP/HTTP  {server.endpoint('/v1/traces')} (logs: {server.endpoint('/v1/logs')})",
        f"  OTLP/gRPC  {server.grpc_endpoint}",
        f"  dashboard  {server.dashboard_url or 'off (--no-ui)'}",
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
