"""Opening a file for writing creates or updates its schema only when it needs it: a file
stamped with this version and this build's DDL digest is left byte for byte as it was (every
command that opens the file read-write used to run the DDL and write its views again); a file
whose digest differs, or that has none yet, gets the DDL once more and the new stamp."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa

from store import connect
from store.testing import SCHEMA_DIGEST, SCHEMA_VERSION


def _digest_stamp(db: Path) -> str | None:
    con = connect(db, read_only=True)
    try:
        row = con.execute(
            "SELECT value FROM budgetscope_meta WHERE key = 'schema_digest'").fetchone()
    finally:
        con.close()
    return row[0] if row else None


def _bytes(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def test_a_new_file_is_stamped_with_the_version_and_the_digest(tmp_path: Path) -> None:
    db = tmp_path / "new.duckdb"
    connect(db).close()
    con = connect(db, read_only=True)
    try:
        stamps = dict(con.execute("SELECT key, value FROM budgetscope_meta").fetchall())
    finally:
        con.close()
    assert stamps == {"schema_version": str(SCHEMA_VERSION), "schema_digest": SCHEMA_DIGEST}


def test_opening_an_up_to_date_file_for_writing_changes_nothing_in_it(tmp_path: Path) -> None:
    db = tmp_path / "current.duckdb"
    connect(db).close()
    before = _bytes(db)
    for _ in range(3):
        connect(db).close()
        assert not Path(f"{db}.wal").exists()
    assert _bytes(db) == before


def test_an_open_that_runs_no_ddl_leaves_no_result_unread(tmp_path: Path) -> None:
    """DuckDB refuses `register` (how Arrow tables are handed over) on a connection whose last
    result is not read to its end: the open's last read must be read whole."""
    db = tmp_path / "current.duckdb"
    connect(db).close()
    con = connect(db)
    try:
        con.register("handed_over", pa.table({"n": [1, 2]}))
        assert con.execute("SELECT sum(n) FROM handed_over").fetchall() == [(3,)]
    finally:
        con.close()


def test_a_file_with_another_digest_or_none_gets_the_ddl_again(tmp_path: Path) -> None:
    """What a DDL file edited without a new version does (a view's body changed), and a file
    stamped before digests were: the next open runs the DDL, which puts back the view that is
    gone here, and stamps this build's digest."""
    db = tmp_path / "older.duckdb"
    for stale in ("UPDATE budgetscope_meta SET value = 'an older build' "
                  "WHERE key = 'schema_digest'",
                  "DELETE FROM budgetscope_meta WHERE key = 'schema_digest'"):
        con = connect(db)
        con.execute("DROP VIEW write_steps")
        con.execute(stale)
        con.close()
        con = connect(db)
        try:
            assert con.execute("SELECT count(*) FROM write_steps").fetchone() == (0,)
        finally:
            con.close()
        assert _digest_stamp(db) == SCHEMA_DIGEST
