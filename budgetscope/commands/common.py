"""What every command shares: opening the database with errors a person can read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click
import duckdb

from ingest.database import DatabaseBusy, connect
from ingest.ddl import SchemaError


class Fail(click.ClickException):
    """A one-line error and exit status 1, never a traceback."""

    exit_code = 1

    def format_message(self) -> str:
        return self.message


@contextmanager
def open_database(path: str, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    try:
        con = connect(path, read_only=read_only)
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
