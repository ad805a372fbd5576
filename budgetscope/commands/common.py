"""What every command shares: opening the database with errors a person can read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click
import duckdb

from ingest.database import DatabaseBusy, connect
from ingest.ddl import SchemaError
from ingest.derivation import PendingDerivations
from queries.derive import refresh_touched


class Fail(click.ClickException):
    """A one-line error and exit status 1, never a traceback."""

    exit_code = 1

    def format_message(self) -> str:
        return self.message


def catch_up_derivations(con: duckdb.DuckDBPyConnection) -> None:
    """Derive what a stopped or crashed writer left marked, so reports see every stored span."""
    if PendingDerivations.count(con):
        PendingDerivations(refresh_touched).run(con)


@contextmanager
def open_database(path: str, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    try:
        con = connect(path, read_only=read_only)
        if not read_only:
            catch_up_derivations(con)
    except (DatabaseBusy, SchemaError) as error:
        raise Fail(str(error)) from None
    except duckdb.Error as error:
        raise Fail(f"cannot open database {path}: {error}") from None
    try:
        yield con
    finally:
        con.close()


def db_option(context: click.Context) -> str:
    return context.obj["db"]
