"""`budgetscope report` and `budgetscope run` through click, on real DuckDB files.

Golden files: tests/golden/fleet_<report>.csv (the hand-worked fleet of tests/support/fleet.py) and
tests/golden/sample_<report>.csv (the bundled sample traces). Regenerate them with
BUDGETSCOPE_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from budgetscope.config import SAMPLE_TRACES
from queries import reports
from queries.render import to_csv_bytes
from tests.support.fleet import build_fleet
from tests.support.trace_builder import open_db

GOLDEN = Path(__file__).with_name("golden")
UPDATE = os.environ.get("BUDGETSCOPE_UPDATE_GOLDEN") == "1"
NAMES = list(reports.REPORTS)


def check_golden(name: str, data: bytes) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_bytes(data)
    assert path.exists(), f"{path} missing: run with BUDGETSCOPE_UPDATE_GOLDEN=1"
    assert data == path.read_bytes(), f"{name} differs from its golden file"


@pytest.fixture(scope="module")
def fleet_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "fleet.duckdb"
    con = open_db(path.parent, path.name)
    ids = build_fleet(con)
    con.close()
    return str(path), ids


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("name", NAMES)
def test_fleet_report_golden(fleet_db, name):
    db, _ = fleet_db
    result = invoke("--db", db, "report", name)
    assert result.exit_code == 0, result.output
    check_golden(f"fleet_{name}.csv", result.stdout_bytes)


def test_dashboard_csv_is_byte_identical_to_cli(fleet_db, tmp_path):
    db, _ = fleet_db
    out = tmp_path / "weekly.csv"
    result = invoke("--db", db, "report", "weekly", "--out", str(out))
    assert result.exit_code == 0, result.output
    con = open_db(Path(db).parent, Path(db).name)
    try:
        assert out.read_bytes() == to_csv_bytes(reports.weekly(con))
    finally:
        con.close()


def test_formats_and_filters(fleet_db):
    db, _ = fleet_db
    result = invoke("--db", db, "report", "attribution", "--agent", "alpha", "--format", "json")
    assert result.exit_code == 0, result.output
    assert '"step_key": "model:gpt"' in result.output
    assert '"budget_share": 0.566667' in result.output
    table = invoke("--db", db, "report", "attribution", "--format", "table")
    assert table.exit_code == 0, table.output
    assert "culprit is the holder in 0.0%" in table.output
    since = invoke("--db", db, "report", "runs", "--since", "2026-11-23", "--until",
                   "2026-11-23T11:00:00Z")
    assert since.exit_code == 0, since.output
    assert len(since.output.splitlines()) == 2  # header + A1


@pytest.mark.parametrize("args,message", [
    (["report", "nope"], "unknown report 'nope'"),
    (["report", "runs", "--since", "last week"], "--since: 'last week' is not an ISO date"),
    (["report", "runs", "--until", "2026-11-31"], "--until: '2026-11-31'"),
    (["run", "0" * 32], "no run '00000000000000000000000000000000'"),
    (["report", "runs", "--format", "xml"], "Invalid value for '--format'"),
])
def test_bad_input_is_one_line_and_non_zero(fleet_db, args, message):
    db, _ = fleet_db
    result = invoke("--db", db, *args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_missing_database(tmp_path):
    result = invoke("--db", str(tmp_path / "none.duckdb"), "report", "runs")
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: no database at")
    assert not (tmp_path / "none.duckdb").exists()


def test_run_view(fleet_db):
    db, ids = fleet_db
    result = invoke("--db", db, "run", ids["A1"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert f"run {ids['A1']}  agent alpha" in text
    # Durations and percentages as the dashboard writes them (issue 15: one formatting module)
    assert "exhausted true  budget 10.0 s  elapsed 12.0 s  utilisation 120.0%" in text
    assert ("The deadline fired at +10.0 s; the run's last span ended at +12.0 s, 2.0 s past "
            "it. Exhausted: it ran to its deadline.") in text
    assert "culprit tool:fetch (80.0% of the budget" in text
    assert ("holder model:gpt (running when the deadline fired)  <- culprit is not the holder"
            in text)
    assert "| = deadline at +10.0 s" in text
    assert "failures by class: ok 2, client_timeout 0" in text
    no_budget = invoke("--db", db, "run", ids["N1"])
    assert no_budget.exit_code == 0, no_budget.output
    assert "No budget is known for this run (no budget.total_ms" in no_budget.output
    assert "failures by class: ok 0, client_timeout 1" in no_budget.output
    wrong = invoke("--db", db, "run", f"{ids['A1']}/0000000000000000")
    assert wrong.exit_code == 1 and f"runs of that trace: {ids['A1']}" in wrong.output


def test_run_view_writes(tmp_path):
    from tests.support.trace_builder import TraceBuilder, store
    b = TraceBuilder()
    run = b.run(0, 5_000, 4_000)
    b.step(run, "tool", "pay", 0, 4_000, **{"budget.side_effect": "write",
                                            "budget.idempotency_key": "pay-123",
                                            "budget.outcome": "client_timeout"})
    b.step(run, "tool", "mail", 4_000, 4_500, **{"budget.side_effect": "write",
                                                 "budget.idempotency_key": "mail-9",
                                                 "budget.effect_status": "possible"})
    b.step(run, "reconcile", "mail", 4_500, 4_600, **{"budget.idempotency_key": "mail-9",
                                                      "budget.reconcile.result": "landed"})
    con = open_db(tmp_path)
    store(con, b.finished())
    con.close()
    result = invoke("--db", str(tmp_path / "test.duckdb"), "run", b.trace_id(run))
    assert result.exit_code == 0, result.output
    assert "writes: 2, uncertain 2, reconciled 1, orphan 1" in result.output
    assert "idempotency_key pay-123  ORPHAN" in result.output
    assert "idempotency_key mail-9  reconciled: landed" in result.output


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory):
    if not SAMPLE_TRACES.exists():
        pytest.skip(f"{SAMPLE_TRACES} not bundled yet")
    db = str(tmp_path_factory.mktemp("sample") / "sample.duckdb")
    result = invoke("--db", db, "ingest", "--no-progress", str(SAMPLE_TRACES))
    assert result.exit_code == 0, result.output
    return db


@pytest.mark.parametrize("name", NAMES)
def test_sample_report_golden(sample_db, name):
    result = invoke("--db", sample_db, "report", name)
    assert result.exit_code == 0, result.output
    check_golden(f"sample_{name}.csv", result.stdout_bytes)


def test_a_mistyped_report_name_is_a_usage_error(fleet_db):
    """Issue 15: a typo'd report name exited 1 while other usage errors exit 2."""
    db, _ = fleet_db
    result = invoke("--db", db, "report", "runz")
    assert result.exit_code == 2, result.output
    assert "unknown report 'runz'" in result.output


def test_an_unknown_agent_is_named_with_the_known_ones(fleet_db):
    """Issue 15: `report --agent nosuch` printed only a header and exited 0."""
    db, _ = fleet_db
    result = invoke("--db", db, "report", "weekly", "--agent", "nosuch")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1  # the header: still a valid (empty) CSV
    assert "note: no agent 'nosuch' in this database; known agents: " \
        in result.stderr


def test_runs_report_narrows_sorts_and_limits(fleet_db):
    """Issue 15: `report runs` gains --outcome, --exhausted, --culprit, --sort, --limit, and a
    table lists the newest runs first."""
    import json
    db, ids = fleet_db

    def runs(*args: str) -> list[dict]:
        result = invoke("--db", db, "report", "runs", "--format", "json", *args)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    every = runs()
    assert [r["start"] for r in every] == sorted(r["start"] for r in every)
    exhausted = runs("--exhausted")
    assert exhausted and all(r["exhausted"] is True for r in exhausted)
    assert {r["run_id"] for r in runs("--not-exhausted")} == {
        r["run_id"] for r in every if r["exhausted"] is False}
    assert [r["run_id"] for r in runs("--outcome", "exhausted")] == [
        r["run_id"] for r in every if r["outcome"] == "exhausted"]
    assert len(runs("--outcome", "none")) == sum(r["outcome"] is None for r in every)
    assert {r["culprit"] for r in runs("--culprit", "tool:fetch")} == {"tool:fetch"}
    by_use = runs("--sort", "utilisation:desc", "--limit", "2")
    assert len(by_use) == 2
    assert [r["utilisation"] for r in by_use] == sorted(
        (r["utilisation"] for r in every if r["utilisation"] is not None), reverse=True)[:2]
    table = invoke("--db", db, "report", "runs", "--format", "table")
    assert table.exit_code == 0, table.output
    rows = [line for line in table.output.splitlines()[2:] if line.strip()]
    starts = [next(r["start"] for r in every if line.startswith(r["run_id"])) for line in rows]
    assert starts == sorted(starts, reverse=True)
    wrong = invoke("--db", db, "report", "weekly", "--culprit", "tool:fetch")
    assert wrong.exit_code == 2 and "apply to the runs report only" in wrong.output
    bad_sort = invoke("--db", db, "report", "runs", "--sort", "colour")
    assert bad_sort.exit_code == 2 and "cannot sort by 'colour'" in bad_sort.output


def test_tables_read_as_the_dashboard_does(fleet_db):
    """Issue 15: six-decimal fractions and raw milliseconds in `--format table`."""
    db, _ = fleet_db
    table = invoke("--db", db, "report", "utilisation", "--format", "table").output
    assert "116.0%" in table and "1.160000" not in table
    runs = invoke("--db", db, "report", "runs", "--format", "table").output
    assert "10.0 s" in runs and "10000.000" not in runs
    assert "–" in runs  # N1 has no budget: one mark for no value, never a blank
    csv = invoke("--db", db, "report", "utilisation").output
    assert "1.160000" in csv  # CSV keeps raw fractions (docs/metrics.md §7)
