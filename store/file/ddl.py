"""Creates or checks the schema from the .sql files in schema/, in the order `_order` gives, and
brings an older file up to date with schema_migrations/. Both folders are loaded once, at import,
through the SQL registry (store/file/sql_files.py): a file without its name header, or one that
nobody lists, stops the program at start-up."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb

from store.file.sql_files import load_queries

# 2: spans lost its primary key to span_keys (integer keys, cheaper to keep).
# 3: pending_derivations lost its primary key (append-only marks: the derivation runs beside
#    the writer, see schema/pending.sql).
# 4: declared budgets and step caps (schema/declared_budgets.sql, docs/guide.md#declaring-budgets);
# runs gain
#    budget_source.
#    log_records (schema/log_records.sql: OTLP log records).
#    derivation_failures (schema/derivation_failures.sql): traces whose derivation failed.
#    spans gain the typed columns the conventions of docs/conventions.md read.
# 5: step_lifts (tools lifted out of model steps) and pending_measurements (traces a change of
#    a declared budget marked for measuring again), schema/derived.sql and schema/pending.sql.
# 6: the revised recognition of docs/conventions.md and §4's numbered blame: runs gain culprit_step,
#    holder_step, holder_at_deadline, root_missing; spans gain mcp_method_name;
#    traces_awaiting_root and derivation_notes (schema/derived.sql); every trace derived again.
# 7: tokens and dollars (docs/metrics.md §11): spans gain the usage, cost and budget columns;
#    runs and steps their token and dollar columns; declared_budgets the token, dollar and
#    weekly dimensions; metered_spans (schema/derived.sql) and the price tables
#    (schema/prices.sql) are new; every trace derived again.
# 8: docs/conventions.md's rules across traces (a model step named after its service's named
#    spans, HTTP client spans in a trace of their own): call_hulls, stray_calls and
#    model_span_names (schema/recognition.sql) are new; every trace derived again.
SCHEMA_VERSION = 8
SCHEMA_FOLDER = Path(__file__).with_name("schema")
# A file of an older version is brought up to date, one version at a time, by
# schema_migrations/<from>_to_<to>.sql, run after the DDL (which creates what is new) in the
# same transaction as the version stamp; a version with no path up is refused.
MIGRATIONS_FOLDER = Path(__file__).with_name("schema_migrations")


class SchemaError(RuntimeError):
    """The DDL files are inconsistent, or the database was written by another schema version."""


def ddl_files() -> list[str]:
    """The DDL file names in run order. A .sql file not listed in _order is a mistake that
    would silently never run, so it stops the program instead."""
    order_text = (SCHEMA_FOLDER / "_order").read_text(encoding="utf-8")
    ordered = [line.strip() for line in order_text.splitlines()
               if line.strip() and not line.lstrip().startswith("#")]
    present = {entry.name for entry in SCHEMA_FOLDER.iterdir() if entry.name.endswith(".sql")}
    unlisted = sorted(present - set(ordered))
    missing = [name for name in ordered if name not in present]
    if unlisted or missing:
        raise SchemaError(f"schema/_order does not match the .sql files: unlisted {unlisted}, "
                          f"missing {missing}")
    return ordered


# The DDL files by name (their set is _order's), and the migration of every version up to this
# one: `<from>_to_<to>` for each version from 1 (the first schema) on.
DDL = load_queries(SCHEMA_FOLDER, frozenset(Path(name).stem for name in ddl_files()))
MIGRATIONS = load_queries(MIGRATIONS_FOLDER, frozenset(
    f"{version}_to_{version + 1}" for version in range(1, SCHEMA_VERSION)))
# The DDL as this build runs it, stamped beside the version. A file holding both stamps holds
# everything the DDL creates (the DDL, the migrations and the stamps commit in one transaction),
# so opening it for writing runs no DDL: it used to run on every open, ~25 ms, and its two
# `CREATE OR REPLACE VIEW`s wrote to the file each time (a WAL, checkpointed on close), even
# when the command changed nothing (`ingest` of spans already stored, `retain` with nothing old
# enough). A DDL file changed without a new version (a view's body) changes the digest: the DDL
# runs once more on the next open and the new digest is stamped.
SCHEMA_DIGEST = hashlib.sha256("\0".join(
    DDL[Path(name).stem].text for name in ddl_files()).encode("utf-8")).hexdigest()


def apply_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create what is missing; refuse a file written by a different schema version. A file
    already stamped with this version and SCHEMA_DIGEST is left as it is."""
    found = _stored_version(con)
    if found == SCHEMA_VERSION and _stored_digest(con) == SCHEMA_DIGEST:
        return
    if found is None and _foreign_tables(con):
        raise SchemaError(
            "database file holds tables but no budgetscope schema version: it was not written "
            "by budgetscope (or by one older than schema versions); use a new --db file")
    steps = migration_steps(found) if found is not None and found != SCHEMA_VERSION else []
    if found is not None and found != SCHEMA_VERSION and not steps:
        raise SchemaError(
            f"database schema version {found} is not the version this budgetscope uses "
            f"({SCHEMA_VERSION}); open it with a matching budgetscope or re-ingest into a new file")
    con.execute("BEGIN TRANSACTION")
    try:
        for name in ddl_files():
            con.execute(DDL[Path(name).stem].text)
        for step in steps:
            try:
                con.execute(MIGRATIONS[step.stem].text)
            except duckdb.Error as error:
                first_line = str(error).splitlines()[0]
                raise SchemaError(f"could not migrate this file from schema version {found} to "
                                  f"{SCHEMA_VERSION} ({step.name}: {first_line}); the file is "
                                  "left unchanged") from None
        if found is None:
            con.execute("INSERT INTO budgetscope_meta VALUES ('schema_version', ?)",
                        [str(SCHEMA_VERSION)])
        elif steps:
            con.execute("UPDATE budgetscope_meta SET value = ? WHERE key = 'schema_version'",
                        [str(SCHEMA_VERSION)])
        con.execute("INSERT OR REPLACE INTO budgetscope_meta VALUES ('schema_digest', ?)",
                    [SCHEMA_DIGEST])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def up_to_date(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the file holds this version's schema, so that a read-only connection (which
    cannot create or migrate anything) reads what the queries expect."""
    return _stored_version(con) == SCHEMA_VERSION


def migration_steps(found: int) -> list[Path]:
    """The migration files from version `found` up to SCHEMA_VERSION; [] when there is no
    path (a newer file, or one older than the oldest migration)."""
    steps = []
    for version in range(found, SCHEMA_VERSION):
        name = f"{version}_to_{version + 1}"
        if name not in MIGRATIONS:
            return []
        steps.append(MIGRATIONS_FOLDER / f"{name}.sql")
    return steps


def _foreign_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Tables in a file without our meta table: adopting them would silently misread them.
    (Our own interrupted first start is not one: meta.sql runs first, before any table.)"""
    row = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database()"
        " AND table_schema = 'main' AND table_name <> 'budgetscope_meta'").fetchone()
    has_meta = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database()"
        " AND table_name = 'budgetscope_meta'").fetchone()
    return bool(row and row[0]) and not (has_meta and has_meta[0])


def _stored_digest(con: duckdb.DuckDBPyConnection) -> str | None:
    """The DDL digest stamped by the last budgetscope that created or updated the schema (None
    in a file stamped before digests were)."""
    # fetchall, not fetchone: the open may return right after this read, and DuckDB refuses
    # some calls (register) on a connection whose last result is not read to its end.
    rows = con.execute(
        "SELECT value FROM budgetscope_meta WHERE key = 'schema_digest'").fetchall()
    return rows[0][0] if rows else None


def _stored_version(con: duckdb.DuckDBPyConnection) -> int | None:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'budgetscope_meta'"
    ).fetchone()
    if not exists or not exists[0]:
        return None
    row = con.execute(
        "SELECT value FROM budgetscope_meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    try:
        return int(row[0])
    except ValueError:
        raise SchemaError(f"database schema version {row[0]!r} is not a number") from None
