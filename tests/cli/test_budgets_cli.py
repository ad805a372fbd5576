"""`budgetscope budgets` on a file nobody holds (docs/metrics.md §8,
docs/guide.md#declaring-budgets): declarations are stored in the database, the affected runs
re-derived before the command returns, bad input refused with exit status 2 and a message naming the
problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from tests.support.trace_builder import TraceBuilder, open_db, store


# The runs every test starts from, stored and derived once a module; each test changes a copy
# of the file (`db`). Building it per test was most of this module's time: 21 builds, 3-8 s each
# on 2 loaded cores, for tests that each read a few rows.
@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("budgets")
    path = folder / "budgets.duckdb"
    con = open_db(folder, path.name)
    try:
        b = TraceBuilder()
        run = b.run(0, 9_000, None, gen__ai_agent_name="billing")
        b.step(run, "tool", "fetch", 1_000, 7_000)
        own = b.run(0, 9_000, 20_000, gen__ai_agent_name="billing")
        b.step(own, "tool", "fetch", 1_000, 7_000)
        store(con, b.finished())
    finally:
        con.close()
    return path


@pytest.fixture
def db(built: Path, tmp_path: Path) -> Path:
    path = tmp_path / built.name
    shutil.copyfile(built, path)
    return path


def invoke(db: Path, *arguments: str):
    return CliRunner().invoke(cli, ["--db", str(db), "budgets", *arguments])


def runs_report(db: Path) -> list[dict]:
    result = CliRunner().invoke(cli, ["--db", str(db), "report", "runs", "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_set_changes_the_runs_report_at_once(db: Path) -> None:
    before = {r["budget_source"] for r in runs_report(db)}
    assert before == {"span", None}
    result = invoke(db, "set", "billing", "8s")
    assert result.exit_code == 0, result.output
    assert "budget of agent 'billing' set to 8s (8000 ms); 1 run re-derived" in result.output
    rows = sorted(runs_report(db), key=lambda r: r["budget_ms"])
    # the run without its own budget: B = 8000 declared, elapsed 9000 → utilisation 1.125
    assert (rows[0]["budget_ms"], rows[0]["budget_source"]) == (8_000, "declared")
    assert rows[0]["utilisation"] == pytest.approx(1.125) and rows[0]["exhausted"] is True
    assert (rows[1]["budget_ms"], rows[1]["budget_source"]) == (20_000, "span")

    result = invoke(db, "set", "billing", "8000ms")
    assert result.exit_code == 0 and "already 8s; nothing changed" in result.output
    result = invoke(db, "unset", "billing")
    assert result.exit_code == 0 and "removed" in result.output
    assert {r["budget_source"] for r in runs_report(db)} == {"span", None}


@pytest.mark.slow
def test_default_cap_and_list(db: Path) -> None:
    assert invoke(db, "set", "--default", "1m").exit_code == 0
    result = invoke(db, "cap", "tool:fetch", "3s")
    assert result.exit_code == 0, result.output
    assert invoke(db, "cap", "tool:never_seen", "3s").exit_code == 0  # allowed
    result = invoke(db, "list", "--format", "json")
    assert result.exit_code == 0, result.output
    listed = [(d["what"], d["scope"], d["target"], d["duration_ms"])
              for d in json.loads(result.output)]
    assert listed == [("budget", "default", None, 60_000),
                      ("cap", "step", "tool:fetch", 3_000),
                      ("cap", "step", "tool:never_seen", 3_000)]
    table = invoke(db, "list")
    assert table.exit_code == 0
    assert "tool:fetch" in table.output and "60s" in table.output
    # fetch [1000, 7000) with cap 3 s, in the run of B = 60 s (default) and the run of
    # B = 20 s (span): min(3000, B - 1000) = 3000 → 6000 / 3000 = 2.0 in both
    con = open_db(db.parent, db.name)
    try:
        assert con.execute("SELECT allocated_ms, utilisation FROM steps").fetchall() == [
            (3_000, 2.0), (3_000, 2.0)]
    finally:
        con.close()
    for arguments in (["uncap", "tool:fetch"], ["uncap", "tool:never_seen"],
                      ["unset", "--default"]):
        assert invoke(db, *arguments).exit_code == 0
    assert "nothing declared" in invoke(db, "list").output


@pytest.mark.parametrize(("arguments", "problem"), [
    (["set", "billing", "0s"], "'0s' is zero"),
    (["set", "billing", "0"], "has no unit"),
    (["set", "billing", "-5s"], "'-5s' is negative"),
    (["set", "billing", "45"], "'45' has no unit"),
    (["set", "billing", "fast"], "'fast' is not a duration"),
    (["set", "--default", "-1m"], "is negative"),
    (["set", "--default", "0ms"], "is zero"),
    (["set", "billing"], "set takes AGENT DURATION"),
    (["set", "", "5s"], "agent name is empty"),
    (["cap", "fetch_report", "5s"], "'fetch_report' is not kind:name"),
    (["cap", "tools:fetch_report", "5s"], "'tools' is not a step kind"),
    (["cap", "tool:", "5s"], "has no name"),
    (["cap", "tool:fetch", "0s"], "is zero"),
    (["cap", "tool:fetch", "5"], "has no unit"),
    (["uncap", "fetch"], "is not kind:name"),
    (["unset"], "unset takes AGENT, or --default"),
])
def test_bad_input_is_refused_with_exit_2_naming_the_problem(db: Path, arguments, problem
                                                             ) -> None:
    result = invoke(db, *arguments)
    assert result.exit_code == 2, result.output
    assert problem in result.output
    assert "nothing declared" in invoke(db, "list").output  # nothing stored


def test_list_without_a_database_says_so(tmp_path: Path) -> None:
    result = invoke(tmp_path / "missing.duckdb", "list")
    assert result.exit_code == 1 and "no database at" in result.output


def test_declaring_before_any_trace_arrives(tmp_path: Path) -> None:
    """In a database with no trace yet (as `serve` or `ingest` makes it; a missing file is
    refused, tests/cli/test_cli_report.py), the declaration waits for the agent's runs."""
    db = tmp_path / "new.duckdb"
    open_db(tmp_path, db.name).close()
    result = invoke(db, "set", "billing", "45s")
    assert result.exit_code == 0, result.output
    assert "no stored run of agent 'billing'" in result.output
    con = open_db(tmp_path, db.name)
    try:
        b = TraceBuilder()
        b.run(0, 30_000, None, gen__ai_agent_name="billing")
        store(con, b.finished())  # the derivation reads the declaration
        assert con.execute("SELECT budget_ms, budget_source FROM runs").fetchall() == [
            (45_000, "declared")]
    finally:
        con.close()


def test_the_run_command_says_when_the_budget_is_declared(db: Path) -> None:
    assert invoke(db, "set", "billing", "8s").exit_code == 0
    declared = next(r for r in runs_report(db) if r["budget_source"] == "declared")
    result = CliRunner().invoke(cli, ["--db", str(db), "run", declared["run_id"]])
    assert result.exit_code == 0, result.output
    assert "budget 8.0 s (declared)  elapsed 9.0 s" in result.output
