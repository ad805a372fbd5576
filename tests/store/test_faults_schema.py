"""A database file from a schema version with no migration path, or from no budgetscope at all,
is refused with a clear message by every command that opens it, and left as it was.
Written relative to store.testing.SCHEMA_VERSION so that a version bump keeps the test meaningful;
files that can be migrated are tests/store/test_schema_migration.py's."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from store import SchemaError, connect
from store.testing import SCHEMA_VERSION
from tests.support.receivers import raw_request

CLI = [sys.executable, "-c", "from budgetscope.cli import main; main()"]


def _older_file(folder: Path, version: int) -> Path:
    """A file written by this budgetscope (with a span in it), then stamped `version`."""
    db = folder / f"v{version}.duckdb"
    con = connect(db)
    try:
        from ingest.decode.flatten import flatten_request
        from store import SpanWriter

        SpanWriter(con).write(flatten_request(raw_request(3)))
        con.execute("UPDATE budgetscope_meta SET value = ? WHERE key = 'schema_version'",
                    [str(version)])
    finally:
        con.close()
    return db


def _pre_versioning_file(folder: Path) -> Path:
    """Spans in an older layout and no meta table: what an unversioned writer would leave."""
    db = folder / "unversioned.duckdb"
    con = duckdb.connect(str(db))
    try:
        con.execute("CREATE TABLE spans (trace_id VARCHAR, span_id VARCHAR, name VARCHAR, "
                    "start_ns BIGINT, end_ns BIGINT)")
        con.execute("INSERT INTO spans VALUES ('ab', 'cd', 'old', 1, 2)")
    finally:
        con.close()
    return db


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["older", "newer", "unversioned"])
def test_a_file_from_another_schema_is_refused_by_every_command_and_left_alone(
        tmp_path: Path, kind: str) -> None:
    if kind == "unversioned":
        db = _pre_versioning_file(tmp_path)
        expected = "no budgetscope schema version"
    else:
        # "older": older than the oldest migration (test_schema_migration.py covers the rest)
        version = 0 if kind == "older" else SCHEMA_VERSION + 1
        db = _older_file(tmp_path, version)
        expected = f"database schema version {version} is not the version"
    before = _digest(db)
    with pytest.raises(SchemaError, match=expected):
        connect(db)
    commands = [["report", "runs"],
                ["serve", "--no-ui", "--otlp-http-port", "0", "--otlp-grpc-port", "0"]]
    # Each command start costs seconds: the other kinds go through serve only (ingest's
    # refusal is tested in tests/cli/test_cli_ingest.py).
    for arguments in commands if kind == "older" else commands[1:]:
        done = subprocess.run([*CLI, "--db", str(db), *arguments], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode != 0, (arguments, done.stdout)
        message = (done.stderr + done.stdout).strip()
        assert expected in message and "Traceback" not in message, (arguments, message)
    assert _digest(db) == before, "the refused file was modified"
