"""Under `budgetscope serve`, which knows its dashboard's address, `run` and `check` lead to
it: `run` prints the run view's address, each `check` breach the Runs page's; and the CLI
pointed at the dashboard's port by mistake is told which port to use (it got "405 Method Not
Allowed"). A real serve with its dashboard, on free ports, owns a copy of the sample."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner, Result

from budgetscope.cli import cli
from tests.support import ui
from tests.support.serve import start_serve, stop

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict]]:
    db = tmp_path_factory.mktemp("leads") / "served.duckdb"
    shutil.copyfile(ui.sample_db(tmp_path_factory), db)
    process, announced = start_serve(db, "--ui-port", str(ui.free_port()))
    try:
        # announced once the receivers listen: the dashboard follows
        assert ui.wait_until_served(announced["dashboard"], process, 90)
        yield db, announced
    finally:
        code, _, err = stop(process)
        assert code == 0, err


def invoke(*arguments: str) -> Result:
    env = {"BUDGETSCOPE_SERVER": None, "BUDGETSCOPE_BACKEND": None, "BUDGETSCOPE_TOKEN": None,
           "BUDGETSCOPE_DASHBOARD_URL": None}
    return CliRunner().invoke(cli, list(arguments), env=env, prog_name="budgetscope")


def test_run_under_serve_prints_the_run_views_address(served: tuple[Path, dict]) -> None:
    db, announced = served
    run_id = ui.exhausted_run(str(db))
    result = invoke("--db", str(db), "run", run_id)
    assert result.exit_code == 0, result.output
    assert f"Run view       {announced['dashboard']}/run?run={run_id}" in result.output
    assert f"{announced['dashboard']}/simulate?range=custom" in result.output


def test_check_under_serve_links_each_breach_to_its_runs(served: tuple[Path, dict]) -> None:
    db, announced = served
    result = invoke("--db", str(db), "check", "--until", "2026-12-01", "--window", "60d",
                    "--max-exhaustion-rate", "0.01")
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("BREACH"))
    assert lines[at + 1].startswith(f"        runs: budgetscope --db {db} report runs "
                                    "--exhausted")
    assert lines[at + 2].startswith(f"        open: {announced['dashboard']}/runs?range=custom")


def test_server_at_the_dashboards_port_names_the_port_to_use(served: tuple[Path, dict]) -> None:
    _, announced = served
    receivers = urlsplit(announced["cli"])
    wanted = f"--server takes its OTLP/HTTP port: http://{receivers.netloc}"
    for arguments in (["report", "weekly"], ["budgets", "list"]):
        result = invoke("--server", announced["dashboard"], *arguments)
        assert result.exit_code != 0
        assert "405" not in result.output and wanted in result.output, result.output


def test_a_standalone_dashboard_says_it_runs_no_commands(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    app = ui.Dashboard(ui.sample_db(tmp_path_factory),
                       tmp_path_factory.mktemp("logs") / "dashboard.log")
    try:
        result = invoke("--server", app.url, "report", "weekly")
    finally:
        app.stop()
    assert result.exit_code == 1
    assert "this is the dashboard of `budgetscope dashboard`, which runs no commands" in \
        result.output
