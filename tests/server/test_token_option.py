"""A token that cannot work, or could be guessed, is refused at start-up with a message: an
empty or blank `--token` used to print "bearer token required" and then accept exports with no
header; a non-ASCII one locked every client out without a word; `--token a` was accepted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.serve import CLI, environment_with_token

# A refused start takes the import time; a start that was not refused runs until killed.
TIMEOUT = 60


def _start(tmp_path: Path, *args: str, env_token: str | None = None
           ) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([*CLI, "--db", str(tmp_path / "t.duckdb"), *args],
                              capture_output=True, text=True,
                              env=environment_with_token(env_token), timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} started instead of refusing the token")


SERVE = ("serve", "--no-ui", "--otlp-http-port", "0", "--otlp-grpc-port", "0")


@pytest.mark.slow
@pytest.mark.parametrize(("token", "says"), [
    ("", "the token is empty"),
    ("   ", "the token is empty"),
    ("\t", "the token is empty"),
    ("sécret", "not printable ASCII"),
    ("tok\u200ben", "not printable ASCII"),
    ("two words", "contains whitespace"),
    ("a", "needs at least 16"),
    ("fifteen-chars-x", "needs at least 16"),
])
def test_serve_refuses_an_unusable_token(tmp_path: Path, token: str, says: str) -> None:
    result = _start(tmp_path, *SERVE, "--token", token)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and "--token" in result.stderr
    assert "bearer token required" not in result.stdout
    assert not (tmp_path / "t.duckdb").exists()  # refused before the database was opened


def test_serve_names_the_environment_variable(tmp_path: Path) -> None:
    result = _start(tmp_path, *SERVE, env_token="  ")
    assert result.returncode == 2
    assert "BUDGETSCOPE_TOKEN" in result.stderr and "the token is empty" in result.stderr
