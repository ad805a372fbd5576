"""serve bounds DuckDB's memory (a process left running for months must not cache every block
it ever touched), and a limit DuckDB does not understand is a one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from store import DatabaseOwner, MemoryLimitError, connect


def test_the_owner_applies_the_limit_to_every_cursor(tmp_path: Path) -> None:
    with DatabaseOwner(tmp_path / "limited.duckdb", memory_limit="300MB") as owner:
        cursor = owner.cursor()
        try:
            limit = cursor.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        finally:
            cursor.close()
    assert limit == "286.1 MiB", limit  # 300 MB in the binary units DuckDB prints


def test_a_limit_duckdb_refuses_is_named_and_frees_the_file(tmp_path: Path) -> None:
    db = tmp_path / "refused.duckdb"
    with pytest.raises(MemoryLimitError, match="'plenty'"):
        DatabaseOwner(db, memory_limit="plenty")
    connect(db).close()  # not left locked


def test_serve_says_which_option_was_wrong(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "x.duckdb"), "serve", "--no-ui",
                                      "--otlp-http-port", "0", "--otlp-grpc-port", "0",
                                      "--memory-limit", "plenty"])
    assert result.exit_code != 0
    assert "memory limit 'plenty'" in result.output and "Traceback" not in result.output


def test_the_owner_checkpoints_at_128_mb_of_wal(tmp_path: Path) -> None:
    """serve's owner raises DuckDB's checkpoint threshold from 16 MB (store/file/owner.py: each
    checkpoint blocks commits, and costs more as the file grows); a file opened after a crash
    replays at most that much WAL."""
    with DatabaseOwner(tmp_path / "owned.duckdb") as owner:
        cursor = owner.cursor()
        try:
            threshold = cursor.execute(
                "SELECT current_setting('checkpoint_threshold')").fetchone()[0]
        finally:
            cursor.close()
    assert threshold == "122.0 MiB", threshold  # 128 MB in DuckDB's binary units
