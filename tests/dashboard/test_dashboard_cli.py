"""`budgetscope demo` ends by serving the dashboard on the demo database (unless --no-ui), and
`budgetscope dashboard` serves it on an existing one. Streamlit itself is replaced by a
recorder here; the browser tests run the real server."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from budgetscope.commands import dashboard, demo
from dashboard.filters import FilterState
from dashboard.server.bootstrap import DashboardServer
from tests.support.ui import REPO


@pytest.fixture(scope="module")
def small_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("traces") / "small.jsonl.gz"
    subprocess.run([sys.executable, "-m", "sample_traces.generate", "--runs", "12",
                    "--out", str(path)], cwd=REPO, check=True, capture_output=True)
    return path


@pytest.fixture()
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """(db, host, port, opening) of each serve_dashboard call, which is recorded, not run."""
    calls: list[tuple] = []

    def record(db: str, server: DashboardServer, opening: FilterState | None = None,
               **_: object) -> None:
        calls.append((db, server.host, server.port, opening))

    monkeypatch.setattr(demo, "serve_dashboard", record)
    monkeypatch.setattr(dashboard, "serve_dashboard", record)
    return calls


def test_demo_opens_the_dashboard_on_the_demo_database(
        small_sample: Path, tmp_path: Path, served: list[tuple],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "SAMPLE_TRACES", small_sample)
    db = tmp_path / "demo.duckdb"
    result = CliRunner().invoke(cli, ["demo", "--db", str(db), "--port", "8599"])
    assert result.exit_code == 0, result.output
    assert [call[:3] for call in served] == [(str(db), "127.0.0.1", 8599)]
    # ... opening on the sample's own whole weeks, not on "Last 7 days" of it
    import datetime as dt

    opening = served[0][3]
    since, until = (dt.date.fromisoformat(d) for d in (opening.since, opening.until))
    assert opening.preset == "custom" and since.weekday() == until.weekday() == 0
    assert since < until and (until - since).days % 7 == 0
    served.clear()
    result = CliRunner().invoke(cli, ["demo", "--db", str(db), "--no-ui"])
    assert result.exit_code == 0, result.output
    assert served == []


def test_dashboard_command_serves_an_existing_database(
        small_sample: Path, tmp_path: Path, served: list[tuple]) -> None:
    db = tmp_path / "traces.duckdb"
    loaded = CliRunner().invoke(cli, ["--db", str(db), "ingest", "--no-progress",
                                      str(small_sample)])
    assert loaded.exit_code == 0, loaded.output
    # Beyond loopback with no token is refused unless told: --insecure-no-auth.
    result = CliRunner().invoke(cli, ["--db", str(db), "dashboard", "--port", "8600",
                                      "--host", "0.0.0.0", "--insecure-no-auth"])
    assert result.exit_code == 0, result.output
    assert [call[:3] for call in served] == [(str(db), "0.0.0.0", 8600)]


def test_demo_follows_the_global_db_option(
        small_sample: Path, tmp_path: Path, served: list[tuple],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: `budgetscope --db X demo` ignored --db and wrote budgetscope-demo.duckdb."""
    monkeypatch.setattr(demo, "SAMPLE_TRACES", small_sample)
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "mine.duckdb"
    result = CliRunner().invoke(cli, ["--db", str(db), "demo", "--no-ui"])
    assert result.exit_code == 0, result.output
    assert db.exists()
    assert not (tmp_path / "budgetscope-demo.duckdb").exists()
    assert f"--db {db} report" in result.output
    # the headline table reads as `report --format table` does: no raw six-decimal fractions
    assert not re.search(r"0\.\d{6}", result.output)


def test_demo_on_a_taken_port_says_so_before_loading(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: with 8501 taken, `make demo` failed only after printing the URL."""
    import socket
    monkeypatch.chdir(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = CliRunner().invoke(cli, ["demo", "--port", str(port)])
    assert result.exit_code == 1
    assert f"port {port} on 127.0.0.1 is taken" in result.output
    assert "make demo PORT=" in result.output
    assert not (tmp_path / "budgetscope-demo.duckdb").exists()
