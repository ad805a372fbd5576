"""`budgetscope dashboard`: the Streamlit dashboard on an existing database, standalone.

The dashboard opens the file read-only while it draws a page and closes it when the page is done,
so `budgetscope ingest` can still write between page loads. When `budgetscope serve` holds the
file, its own dashboard is the one to open; this command says where it is.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlencode

import click
import duckdb

from budgetscope.commands.common import backend_option, db_option, no_database, say_caught_up
from budgetscope.commands.ports import require_free
from budgetscope.commands.tokens import TOKEN_ENV, token_option
from budgetscope.fail import Fail, refuse_trace_file
from budgetscope.log_format import pace_client_logs
from budgetscope.server.descriptors import dashboard_alone
from dashboard.config import DEFAULT_REFRESH_SECONDS, DashboardConfig
from dashboard.filters import FilterState
from dashboard.server import bootstrap
from dashboard.server.access import AccessPolicy, is_loopback
from dashboard.server.bootstrap import DashboardServer
from dashboard.server.connections import DEFAULT_MAX_CONNECTIONS, ConnectionLimits
from dashboard.server.ground import UnsupportedStreamlit
from ingest.receivers.auth import FailedTokens
from store import DatabaseBusy, SchemaError, Source, clickhouse, open_for_reading

ALLOWED_HOSTS_ENV = "BUDGETSCOPE_ALLOWED_HOSTS"


def check_readable(db: str) -> None:
    """Fail early, with the server's address, when another process holds the file. What a
    stopped writer left is derived first when the file can be opened for writing at once
    (store.open_for_reading); else the dashboard reads it as it is and says so."""
    if not Path(db).exists():
        raise Fail(no_database(db))
    refuse_trace_file(db)
    try:
        open_for_reading(db, say_caught_up).close()
    except (DatabaseBusy, SchemaError) as error:
        raise Fail(str(error)) from None
    except duckdb.Error as error:
        raise Fail(f"cannot open database {db}: {error}") from None


def refuse_open_exposure(host: str, token: str | None, insecure_no_auth: bool,
                         what: str) -> None:
    """Listening beyond loopback with no token lets anyone who can reach the machine in:
    refused unless the operator says a proxy in front does the authentication."""
    if token is None and not insecure_no_auth and not is_loopback(host):
        raise click.UsageError(
            f"--host {host} with no --token would let anyone who can reach this machine "
            f"{what}; give --token (or {TOKEN_ENV}), or --insecure-no-auth if "
            "something in front of it authenticates users")


def refresh_option(function):  # type: ignore[no-untyped-def]
    """`--refresh-seconds`, shared by `dashboard`, `demo` and `serve`."""
    return click.option(
        "--refresh-seconds", type=click.FloatRange(min=0), default=DEFAULT_REFRESH_SECONDS,
        show_default=True,
        help="How often an open page checks for new spans and redraws when there are; "
             "0 turns it off.")(function)


def _say_access(server: DashboardServer) -> None:
    if server.access is not None and server.access.token is not None:
        click.echo("token required: open it once as http://…/?token=YOUR_TOKEN (a cookie "
                   "keeps you in), or send Authorization: Bearer YOUR_TOKEN")


def run_dashboard(server: DashboardServer, config: DashboardConfig) -> None:
    """The dashboard (dashboard/server/bootstrap.py) until Ctrl-C / SIGTERM; a Streamlit
    outside the supported series is a failure that names the series. What a client can make
    the servers log is paced (budgetscope/log_format.py)."""
    pace_client_logs()
    try:
        bootstrap.serve(server, config)
    except UnsupportedStreamlit as error:
        raise Fail(str(error)) from None


def serve_dashboard(db: str, server: DashboardServer, opening: FilterState | None = None,
                    refresh_seconds: float = DEFAULT_REFRESH_SECONDS) -> None:
    """The dashboard on `db`, standalone, until Ctrl-C / SIGTERM; `opening`: the filters an
    address without any opens on (the address printed says them too)."""
    config = DashboardConfig(Source(db=os.path.abspath(db)), opening=opening,
                             refresh_seconds=refresh_seconds)
    url_host = f"[{server.host}]" if ":" in server.host else server.host
    query = "" if opening is None else "/?" + urlencode(opening.query_params())
    click.echo(f"dashboard on {db}: http://{url_host}:{server.port}{query}  (Ctrl-C to stop)")
    _say_access(server)
    run_dashboard(server, config)


def serve_backend_dashboard(backend: str, server: DashboardServer,
                            refresh_seconds: float = DEFAULT_REFRESH_SECONDS) -> None:
    """The dashboard on a ClickHouse backend (--backend), until Ctrl-C / SIGTERM. The process
    keeps one connection; its derived tables are brought up to date before the first page."""
    try:
        clickhouse.ensure_derived(clickhouse.connect(backend))
    except (clickhouse.BackendError, clickhouse.NoTraces) as error:
        raise Fail(str(error)) from None
    config = DashboardConfig(Source(backend=backend), refresh_seconds=refresh_seconds)
    url_host = f"[{server.host}]" if ":" in server.host else server.host
    shown = clickhouse.parse_backend_url(backend).describe()
    click.echo(f"dashboard on {shown}: http://{url_host}:{server.port}  (Ctrl-C to stop)")
    _say_access(server)
    run_dashboard(server, config)


def alone_connections() -> ConnectionLimits:
    """The connection cap of a dashboard running alone: the soft descriptor limit raised to
    the hard one, the cap what its reserve leaves (budgetscope/server/descriptors.py)."""
    return ConnectionLimits(max_connections=dashboard_alone(DEFAULT_MAX_CONNECTIONS))


def access_options(function):  # type: ignore[no-untyped-def]
    """`--allowed-host` and `--insecure-no-auth`, shared by `dashboard` and `serve`."""
    function = click.option(
        "--insecure-no-auth", is_flag=True,
        help="Allow a non-loopback --host without --token (only when something in front "
             "authenticates users).")(function)
    return click.option(
        "--allowed-host", "allowed_hosts", multiple=True, envvar=ALLOWED_HOSTS_ENV,
        help="A name the dashboard (and serve's /cli, /budgets and /metrics) answers to "
             "besides the loopback names, --host and this machine's host name (Host header "
             "check against DNS rebinding); repeatable; "
             f"'*' turns the check off. Env {ALLOWED_HOSTS_ENV}, space-separated.")(function)


def access_policy(host: str, port: int, token: str | None, allowed_hosts: tuple[str, ...],
                  failed_tokens: FailedTokens | None = None) -> AccessPolicy:
    """The dashboard's Host/Origin/token policy, with its own pace of wrong tokens unless one
    is given (ingest/receivers/auth.py: each surface keeps its own)."""
    return AccessPolicy.build(listen_host=host, port=port, token=token,
                              extra_hosts=allowed_hosts,
                              failed_tokens=failed_tokens or FailedTokens())


@click.command("dashboard")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 lets other machines open it (needs --token).")
@click.option("--port", default=8501, show_default=True, type=click.IntRange(1, 65535),
              help="Dashboard port.")
@token_option("Require this token to open the dashboard: once with ?token=TOKEN, which "
              "leaves a cookie, or Authorization: Bearer TOKEN")
@access_options
@refresh_option
@click.pass_context
def dashboard_command(context: click.Context, host: str, port: int, token: str | None,
                      allowed_hosts: tuple[str, ...], insecure_no_auth: bool,
                      refresh_seconds: float) -> None:
    """Serve the dashboard on an existing database (read-only; the file stays free for
    `budgetscope ingest` between page loads)."""
    refuse_open_exposure(host, token, insecure_no_auth, "read the dashboard")
    require_free(host, port, "the dashboard", "choose another with --port N")
    server = DashboardServer(host, port, access_policy(host, port, token, allowed_hosts),
                             connections=alone_connections())
    backend = backend_option(context)
    if backend is not None:
        serve_backend_dashboard(backend, server, refresh_seconds)
        return
    db = db_option(context)
    check_readable(db)
    serve_dashboard(db, server, refresh_seconds=refresh_seconds)
