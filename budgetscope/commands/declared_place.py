"""Where `budgetscope budgets` and `budgetscope prices` run: on the file when nobody holds it,
else on the `budgetscope serve` that does (its /budgets or /prices endpoint), or on the
ClickHouse backend of --backend.

Both commands store declarations in the database and re-measure the runs a change affects;
only the change differs, so the choice of place is made once, here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import duckdb

from budgetscope.commands.budgets_remote import RemoteError, endpoint_url
from budgetscope.commands.common import WRITER_WAIT_SECONDS, backend_option, db_option, no_database
from budgetscope.fail import Fail, refuse_trace_file
from store import (
    READER_WAIT_SECONDS,
    DatabaseBusy,
    DeclarationError,
    PriceError,
    SchemaError,
    connect,
)

Local = Callable[[duckdb.DuckDBPyConnection], Any]
Remote = Callable[[str, str | None], Any]


def _remote(remote: Remote, url: str, token: str | None) -> Any:
    try:
        return remote(url, token)
    except RemoteError as error:
        if error.usage:
            raise click.UsageError(str(error)) from None
        raise Fail(str(error)) from None


def carry_out(context: click.Context, *, writes: bool, endpoint: str, local: Local,
              remote: Remote, doing: str) -> Any:
    """Run `local` on the file, or `remote` on the server holding it. `endpoint`: its path on
    the server (/budgets, /prices); `doing`: what a change would have done, said when there is
    no file to do it in."""
    server = context.obj.get("server")
    if server is not None:  # --server URL: its endpoint, whoever holds --db
        return _remote(remote, endpoint_url(server, endpoint), context.obj.get("token"))
    db = db_option(context)
    refuse_trace_file(db)
    if not Path(db).exists():
        # A change would create an empty file, after which `check` says every threshold
        # holds: refused, as `report` refuses a missing file.
        raise Fail(no_database(db, doing))
    try:
        # A read only reads (read-only, beside any other reader, on a read-only file system
        # too); a change writes, and waits a moment for readers to let go.
        con = (connect(db, wait_seconds=WRITER_WAIT_SECONDS) if writes
               else connect(db, read_only=True, wait_seconds=READER_WAIT_SECONDS))
    except DatabaseBusy as busy:
        url = (busy.server or {}).get(endpoint.strip("/"))
        if not isinstance(url, str):
            raise Fail(str(busy)) from None
        return _remote(remote, url, context.obj.get("token"))
    except SchemaError as error:
        raise Fail(str(error)) from None
    except duckdb.Error as error:
        raise Fail(f"cannot open database {db}: {error}") from None
    try:
        return local(con)
    finally:
        con.close()


def on_backend(context: click.Context, work: Callable[[Any], Any]) -> Any:
    """Run `work` on the ClickHouse backend of --backend (the declarations live in ClickHouse
    tables there, and the derived tables are rebuilt whole after a change)."""
    from store import clickhouse  # the backend imports pandas: only for --backend

    backend = backend_option(context)
    try:
        con = clickhouse.connect(str(backend))
        return work(con)
    except clickhouse.BackendError as error:
        raise Fail(str(error)) from None
    except clickhouse.NoTraces as error:
        raise Fail(str(error)) from None
    except (DeclarationError, PriceError) as error:
        raise click.UsageError(str(error)) from None
    except Exception as error:  # the engine's own errors
        raise Fail(f"cannot use backend {backend}: {str(error).splitlines()[0]}") from None
