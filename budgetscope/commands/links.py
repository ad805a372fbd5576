"""What a terminal answer leads to: the command that shows the runs behind it, and the
dashboard's address of the same view when the dashboard's address is known.

The address is known when the command was given `--dashboard-url` (env BUDGETSCOPE_DASHBOARD_URL),
or when `budgetscope serve` runs the command for a client (its read API): serve knows its own
dashboard. Commands are written for the shell (`shlex.join`), with the database they read (the
--db file, or the --backend the command read, without its password), so that one copied from
`check`'s output in cron's mail runs as it is.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from urllib.parse import urlencode, urlsplit

import click

from budgetscope.commands.common import backend_option, db_option
from queries.terminal import terminal_safe
from store import clickhouse

DASHBOARD_URL_ENV = "BUDGETSCOPE_DASHBOARD_URL"


def dashboard_url_option(function):  # type: ignore[no-untyped-def]
    """`--dashboard-url URL`, shared by `check` and `run`."""
    return click.option(
        "--dashboard-url", metavar="URL", envvar=DASHBOARD_URL_ENV, default=None,
        callback=_checked_url,
        help="The dashboard's address (e.g. http://127.0.0.1:8501), to print the link to "
             f"what the output names (env {DASHBOARD_URL_ENV}); under `budgetscope serve`, "
             "its own.")(function)


def _checked_url(context: click.Context, parameter: click.Parameter,
                 value: str | None) -> str | None:
    if not value:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(f"{value!r} is not an http:// or https:// address, e.g. "
                                 "http://127.0.0.1:8501", context, parameter)
    return value.rstrip("/")


def dashboard_url(context: click.Context, given: str | None) -> str | None:
    """The dashboard's address: `--dashboard-url`, else serve's own when serve runs the
    command (budgetscope/server/read_api.py), else None."""
    return given or context.find_root().obj.get("dashboard_url") or None


def database(context: click.Context) -> str:
    """The database a printed command should name: serve's own file when serve runs the
    command for a client (on this machine, a command on it goes to that serve), else --db."""
    return context.find_root().obj.get("served_db") or db_option(context)


def source(context: click.Context) -> tuple[str, str]:
    """The option naming what a printed command reads: `--backend URL` when this command read
    a ClickHouse backend (the URL without its password, which BUDGETSCOPE_CLICKHOUSE_PASSWORD
    gives: a command lands in cron's mail), else `--db` and `database`."""
    backend = backend_option(context)
    if backend and not context.find_root().obj.get("served_db"):
        return ("--backend", clickhouse.parse_backend_url(backend).describe())
    return ("--db", database(context))


def command(context: click.Context, *arguments: str) -> str:
    """`budgetscope --db DB ARGUMENTS…` (or --backend URL), quoted for a shell and inert on a
    terminal (an agent's name comes from a span)."""
    return terminal_safe(shlex.join(["budgetscope", *source(context), *arguments]))


def page_url(base: str, page: str, params: Mapping[str, str]) -> str:
    """The dashboard's address of `page` (its path, e.g. `run` or `runs`) with `params`."""
    # ':' and '/' stay as they are (step keys, run ids below a root): valid in a query, and
    # the link stays readable where it is pasted.
    query = urlencode(dict(params), safe=":/=")
    return f"{base}/{page}" + (f"?{query}" if query else "")
