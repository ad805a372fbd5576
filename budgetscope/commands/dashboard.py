"""`budgetscope dashboard`: the Streamlit dashboard on an existing database, standalone.

The dashboard opens the file read-only while it draws a page and closes it when the page is done,
so `budgetscope ingest` can still write between page loads. When `budgetscope serve` holds the
file, its own dashboard is the one to open; this command says where it is.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from budgetscope.commands.common import Fail, backend_option, db_option, open_database
from budgetscope.config import DB_ENV
from dashboard.settings import DEFAULT_REFRESH_SECONDS, REFRESH_ENV
from queries import clickhouse

DASHBOARD_APP = Path(__file__).resolve().parents[2] / "dashboard" / "streamlit_app.py"


def check_readable(db: str) -> None:
    """Fail early, with the server's address, when another process holds the file."""
    if not Path(db).exists():
        raise Fail(f"no database at {db}; load traces first with `budgetscope ingest`, "
                   "or try `budgetscope demo`")
    # Briefly read-write: derive what a stopped writer left pending, since the dashboard's
    # own read-only connections cannot.
    with open_database(db):
        pass


def run_streamlit(app: Path, host: str, port: int) -> None:
    """Streamlit's server for `app` on this thread until SIGTERM/SIGINT (it installs the
    handlers): headless, no usage statistics, no file watching."""
    from streamlit.web import bootstrap  # imported here: the other commands never load it

    from dashboard.warm_up import start_warm_up

    options = {
        "server_address": host,
        "server_port": port,
        "server_headless": True,
        "server_fileWatcherType": "none",
        "server_runOnSave": False,
        "browser_gatherUsageStats": False,
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
    os.environ[REFRESH_ENV] = repr(seconds)  # read by dashboard.data.refresh_seconds


def serve_dashboard(db: str, host: str, port: int) -> None:
    """The dashboard on `db`, standalone, until Ctrl-C / SIGTERM."""
    os.environ[DB_ENV] = os.path.abspath(db)  # the dashboard's data provider reads this
    url_host = f"[{host}]" if ":" in host else host
    click.echo(f"dashboard on {db}: http://{url_host}:{port}  (Ctrl-C to stop)")
    run_streamlit(DASHBOARD_APP, host, port)


def serve_backend_dashboard(backend: str, host: str, port: int) -> None:
    """The dashboard on a ClickHouse backend (--backend), until Ctrl-C / SIGTERM. The process
    keeps one connection; its derived tables are brought up to date before the first page."""
    try:
        clickhouse.ensure_derived(clickhouse.connect(backend))
    except (clickhouse.BackendError, clickhouse.NoTraces) as error:
        raise Fail(str(error)) from None
    os.environ[clickhouse.BACKEND_ENV] = backend  # the dashboard's data provider reads this
    url_host = f"[{host}]" if ":" in host else host
    shown = clickhouse.parse_backend_url(backend).describe()
    click.echo(f"dashboard on {shown}: http://{url_host}:{port}  (Ctrl-C to stop)")
    run_streamlit(DASHBOARD_APP, host, port)


@click.command("dashboard")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 lets other machines open it.")
@click.option("--port", default=8501, show_default=True, type=click.IntRange(1, 65535))
@refresh_option
@click.pass_context
def dashboard_command(context: click.Context, host: str, port: int,
                      refresh_seconds: float) -> None:
    """Serve the dashboard on an existing database (read-only; the file stays free for
    `budgetscope ingest` between page loads)."""
    backend = backend_option(context)
    set_refresh(refresh_seconds)
    if backend is not None:
        serve_backend_dashboard(backend, host, port)
        return
    db = db_option(context)
    check_readable(db)
    serve_dashboard(db, host, port)
