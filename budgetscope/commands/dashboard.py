"""`budgetscope dashboard`: the Streamlit dashboard on an existing database, standalone.

The dashboard opens the file read-only while it draws a page and closes it when the page is done,
so `budgetscope ingest` can still write between page loads. When `budgetscope serve` holds the
file, its own dashboard is the one to open; this command says where it is.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlencode

import click
import duckdb

from budgetscope.commands.common import (
    Fail,
    backend_option,
    db_option,
    no_database,
    refuse_trace_file,
    say_caught_up,
)
from budgetscope.commands.tokens import TOKEN_ENV, token_option
from dashboard.access import AccessGuard, AccessPolicy, is_loopback
from dashboard.config import DEFAULT_REFRESH_SECONDS, DashboardConfig, configure
from dashboard.filters import FilterState
from ingest.receivers.auth import FailedTokens
from store import DatabaseBusy, SchemaError, Source, clickhouse, open_for_reading

DASHBOARD_APP = Path(__file__).resolve().parents[2] / "dashboard" / "streamlit_app.py"
ALLOWED_HOSTS_ENV = "BUDGETSCOPE_ALLOWED_HOSTS"
# Set by the command before it serves (`set_access`), read by `run_streamlit`: the dashboard
# is never served without a policy, so a caller that forgot one gets the loopback-only default.
_access: AccessPolicy | None = None
# Set by `--refresh-seconds` (`set_refresh`), put into the dashboard's configuration.
_refresh_seconds = DEFAULT_REFRESH_SECONDS


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


def set_access(policy: AccessPolicy) -> None:
    global _access
    _access = policy


def refuse_open_exposure(host: str, token: str | None, insecure_no_auth: bool,
                         what: str) -> None:
    """Listening beyond loopback with no token lets anyone who can reach the machine in:
    refused unless the operator says a proxy in front does the authentication."""
    if token is None and not insecure_no_auth and not is_loopback(host):
        raise click.UsageError(
            f"--host {host} with no --token would let anyone who can reach this machine "
            f"{what}; give --token (or {TOKEN_ENV}), or --insecure-no-auth if "
            "something in front of it authenticates users")


def _install_guard(policy: AccessPolicy) -> None:
    """Put `AccessGuard` in front of the ASGI app Streamlit's server builds, so it sees every
    request: pages, static files, media, `/_stcore/*` and the websocket.

    Streamlit 1.67 serves on Starlette/uvicorn; `UvicornServer.start` builds its app with the
    module-level `create_starlette_app(runtime)` and hands it to uvicorn, so wrapping that one
    function covers every route, present and future. If a Streamlit version builds its app
    some other way, the dashboard refuses to start rather than serve unguarded. Inside the
    guard, `PageHints` adds the preload hints and the server's place to the pages' HTML."""
    from streamlit.web.server.starlette import starlette_server

    from dashboard.page_hints import PageHints

    build = getattr(starlette_server, "create_starlette_app", None)
    start = getattr(getattr(starlette_server, "UvicornServer", None), "start", None)
    if build is None or start is None or "create_starlette_app" not in start.__code__.co_names:
        raise Fail("this Streamlit version builds its server in a way budgetscope cannot "
                   "guard (no starlette_server.create_starlette_app); the dashboard is not "
                   "started unprotected. Install the Streamlit version pyproject.toml names.")
    original = getattr(build, "__wrapped__", build)

    def guarded(runtime):  # type: ignore[no-untyped-def]
        return AccessGuard(PageHints(original(runtime)), policy)

    guarded.__wrapped__ = original  # type: ignore[attr-defined]
    starlette_server.create_starlette_app = guarded


def _never_look_up_addresses() -> None:
    """Streamlit asks for the machine's addresses by reaching out: a UDP socket connected to
    8.8.8.8 (internal IP) and an HTTP request to checkip.amazonaws.com (external IP). Its
    banner did so at start-up (turned off), and its websocket Origin check still does for
    any Origin that is not byte for byte the Host header (`LOCALHOST` against `localhost`,
    an explicit :80), after our guard has already compared them properly. Both answers are
    cached in `streamlit.net_util`; filling the cache means no lookup ever runs."""
    from streamlit import net_util

    net_util._internal_ip = "127.0.0.1"  # type: ignore[attr-defined]
    net_util._external_ip = ""  # type: ignore[attr-defined]  # "" is "unknown", no lookup


def run_streamlit(app: Path, host: str, port: int) -> None:
    """Streamlit's server for `app` on this thread until SIGTERM/SIGINT (it installs the
    handlers): headless, no usage statistics, no file watching, nothing fetched from outside,
    and every request through the access guard (Host, Origin, token)."""
    from streamlit.web import bootstrap  # imported here: the other commands never load it

    from dashboard.warm_up import start_warm_up

    policy = _access or AccessPolicy.build(listen_host=host, port=port, token=None)
    _install_guard(policy)
    _never_look_up_addresses()
    options = {
        "server_address": host,
        "server_port": port,
        "server_headless": True,
        "server_fileWatcherType": "none",
        "server_runOnSave": False,
        # Nothing goes out: no usage statistics; no start-up banner, whose
        # "Network URL" / "External URL" lines on a wildcard --host connect a UDP socket to
        # 8.8.8.8 and ask checkip.amazonaws.com (the commands print their own addresses); no
        # static folder served from the app's directory.
        "browser_gatherUsageStats": False,
        "logger_hideWelcomeMessage": True,
        "server_enableStaticServing": False,
        "global_developmentMode": False,
        "client_toolbarMode": "viewer",  # no "Deploy" button: this is a product, not a sketch
        # Streamlit's full gc.collect(2) after every page run held the GIL ~0.3 s on 1.4M-span
        # pages, stalling every other session (and, in serve, the receivers); Python's own
        # generational collection still runs.
        "runner_postScriptGC": False,
    }
    bootstrap.load_config_options(flag_options=options)
    start_warm_up()
    bootstrap.run(str(app), False, [], options)


def refresh_option(function):  # type: ignore[no-untyped-def]
    """`--refresh-seconds`, shared by `dashboard`, `demo` and `serve`."""
    return click.option(
        "--refresh-seconds", type=click.FloatRange(min=0), default=DEFAULT_REFRESH_SECONDS,
        show_default=True,
        help="How often an open page checks for new spans and redraws when there are; "
             "0 turns it off.")(function)


def set_refresh(seconds: float) -> None:
    global _refresh_seconds
    _refresh_seconds = seconds


def configure_dashboard(config: DashboardConfig) -> None:
    """Hand the dashboard this process will run its configuration (dashboard.config), with
    the refresh `--refresh-seconds` asked for."""
    configure(replace(config, refresh_seconds=_refresh_seconds))


def _say_access() -> None:
    if _access is not None and _access.token is not None:
        click.echo("token required: open it once as http://…/?token=YOUR_TOKEN (a cookie "
                   "keeps you in), or send Authorization: Bearer YOUR_TOKEN")


def serve_dashboard(db: str, host: str, port: int, opening: FilterState | None = None) -> None:
    """The dashboard on `db`, standalone, until Ctrl-C / SIGTERM; `opening`: the filters an
    address without any opens on (the address printed says them too)."""
    configure_dashboard(DashboardConfig(Source(db=os.path.abspath(db)), opening=opening))
    url_host = f"[{host}]" if ":" in host else host
    query = "" if opening is None else "/?" + urlencode(opening.query_params())
    click.echo(f"dashboard on {db}: http://{url_host}:{port}{query}  (Ctrl-C to stop)")
    _say_access()
    run_streamlit(DASHBOARD_APP, host, port)


def serve_backend_dashboard(backend: str, host: str, port: int) -> None:
    """The dashboard on a ClickHouse backend (--backend), until Ctrl-C / SIGTERM. The process
    keeps one connection; its derived tables are brought up to date before the first page."""
    try:
        clickhouse.ensure_derived(clickhouse.connect(backend))
    except (clickhouse.BackendError, clickhouse.NoTraces) as error:
        raise Fail(str(error)) from None
    configure_dashboard(DashboardConfig(Source(backend=backend)))
    url_host = f"[{host}]" if ":" in host else host
    shown = clickhouse.parse_backend_url(backend).describe()
    click.echo(f"dashboard on {shown}: http://{url_host}:{port}  (Ctrl-C to stop)")
    _say_access()
    run_streamlit(DASHBOARD_APP, host, port)


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
    """The dashboard's Host/Origin/token policy; `failed_tokens`: the pace of wrong tokens
    shared with this process's receivers (serve), else the dashboard's own."""
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
    set_access(access_policy(host, port, token, allowed_hosts))
    backend = backend_option(context)
    set_refresh(refresh_seconds)
    if backend is not None:
        serve_backend_dashboard(backend, host, port)
        return
    db = db_option(context)
    check_readable(db)
    serve_dashboard(db, host, port)
