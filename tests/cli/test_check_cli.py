"""`budgetscope check` through CliRunner on a real DuckDB file, against hand-worked figures
(tests/support/ops_traces.py and tests/support/fleet.py): what breached is printed with its
value, exit 1 on a breach, 0 when every threshold holds, 2 on a usage or database error."""

from __future__ import annotations

import datetime as dt
import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from queries.filters import Filters
from queries.signals import recent_signals
from store import connect
from tests.support.ops_traces import EXPECTED, old_run, ops_runs
from tests.support.trace_builder import MS, T0_NS, store

# The ops runs start at T0 (2026-11-23 10:00Z); the old run two days before.
UNTIL = "2026-11-23T11:00:00Z"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("check") / "check.duckdb"
    con = connect(path)
    try:
        store(con, ops_runs(T0_NS))
        store(con, old_run(T0_NS - 2 * 86_400_000 * MS))
    finally:
        con.close()
    return path


def check(db: Path, *arguments: str):
    return CliRunner().invoke(cli, ["--db", str(db), "check", *arguments],
                              catch_exceptions=False)


def test_signals_match_the_hand_worked_runs(db: Path) -> None:
    con = connect(db)
    try:
        until = dt.datetime(2026, 11, 23, 11, tzinfo=dt.UTC)
        inside = recent_signals(con, Filters.ending(until, dt.timedelta(hours=1)))
        wider = recent_signals(con, Filters.ending(until, dt.timedelta(days=3)))
        other_agent = recent_signals(con, Filters.ending(until, dt.timedelta(days=3), "nobody"))
    finally:
        con.close()
    for name, expected in EXPECTED.items():
        assert inside.value(name) == pytest.approx(expected), name
    # the old run: one more budgeted, exhausted run and one more upstream failure
    assert (wider.runs, wider.budgeted_runs, wider.exhausted_runs) == (4, 3, 2)
    assert wider.exhaustion_rate == pytest.approx(2 / 3)
    assert wider.upstream_error_rate == pytest.approx(2 / 8)
    assert other_agent.runs == 0 and other_agent.exhaustion_rate is None


def test_issue_example_breaches_print_values_and_exit_1(db: Path) -> None:
    result = check(db, "--max-reconciliation-rate", "0.02", "--max-exhaustion-rate", "0.05",
                   "--window", "1h", "--until", UNTIL)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0] == ("window 2026-11-23T10:00:00Z to 2026-11-23T11:00:00Z (1h): 3 runs, "
                        "7 steps, 2 write steps")
    assert "BREACH  exhaustion_rate 50.0% > max 5.0% (1 of 2 budgeted runs)" in lines
    assert "BREACH  reconciliation_rate 50.0% > max 2.0% (1 of 2 write steps)" in lines
    assert lines[-1] == "2 of 2 thresholds breached"


def test_thresholds_that_hold_exit_0(db: Path) -> None:
    result = check(db, "--max-exhaustion-rate", "0.5", "--max-client-timeout-rate", "0.3",
                   "--max-upstream-error-rate", "0.15", "--max-orphan-writes", "1",
                   "--min-runs", "3", "--window", "1h", "--until", UNTIL)
    assert result.exit_code == 0, result.output
    assert "ok      client_timeout_rate 28.6% <= max 30.0% (2 of 7 steps)" in result.output
    assert "ok      orphan_writes 1 <= max 1" in result.output
    assert result.output.splitlines()[-1] == "all 5 thresholds hold"


def test_each_threshold_breaches_on_its_own_signal(db: Path) -> None:
    cases = {
        ("--max-orphan-writes", "0"): "BREACH  orphan_writes 1 > max 0",
        ("--max-upstream-error-rate", "0.1"):
            "BREACH  upstream_error_rate 14.3% > max 10.0% (1 of 7 steps)",
        ("--max-client-timeout-rate", "0.25"):
            "BREACH  client_timeout_rate 28.6% > max 25.0% (2 of 7 steps)",
        ("--min-reconciliation-rate", "0.9"):
            "BREACH  reconciliation_rate 50.0% < min 90.0% (1 of 2 write steps)",
        ("--min-runs", "4"): "BREACH  runs 3 < min 4",
    }
    for option, line in cases.items():
        result = check(db, *option, "--window", "1h", "--until", UNTIL)
        assert result.exit_code == 1, (option, result.output)
        assert line in result.output.splitlines(), (option, result.output)


def test_window_and_agent_decide_which_runs_count(db: Path) -> None:
    # 3 days back takes in the old run: 2 of 3 budgeted runs exhausted.
    result = check(db, "--max-exhaustion-rate", "0.6", "--window", "3d", "--until", UNTIL)
    assert result.exit_code == 1
    assert "BREACH  exhaustion_rate 66.7% > max 60.0% (2 of 3 budgeted runs)" in result.output
    # a window with no runs: no data is neither a breach nor a pass to alert on
    result = check(db, "--max-exhaustion-rate", "0", "--until", "2020-01-01")
    assert result.exit_code == 0, result.output
    assert "NO DATA exhaustion_rate: max 0.0% (0 of 0 budgeted runs)" in result.output
    # a misspelt agent is not "no data" but a mistake: exit 2, naming the agents there are
    result = check(db, "--max-exhaustion-rate", "0", "--agent", "nobody", "--until", UNTIL)
    assert result.exit_code == 2 and "known agents:" in result.output


def test_json_format(db: Path) -> None:
    result = check(db, "--max-exhaustion-rate", "0.05", "--max-orphan-writes", "5",
                   "--window", "1h", "--until", UNTIL, "--format", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.output)
    assert document["breached"] is True
    assert document["window"] == {"since": "2026-11-23T10:00:00Z",
                                  "until": "2026-11-23T11:00:00Z", "length": "1h",
                                  "agent": None}
    for name, expected in EXPECTED.items():
        assert document["signals"][name] == pytest.approx(expected), name
    window = "--since 2026-11-23T10:00:00Z --until 2026-11-23T11:00:00Z --format table"
    exhausted = f"budgetscope --db {db} report runs --exhausted --sort culprit_share:desc {window}"
    orphans = f"budgetscope --db {db} report runs --writes orphan {window}"
    # runs_commands: every command behind a check (several for a weekly budget breached by
    # several agent-weeks); runs_command and runs_link, the first
    assert document["checks"] == [
        {"signal": "exhaustion_rate", "bound": "max", "limit": 0.05, "value": 0.5,
         "state": "breach", "runs_link": None, "runs_command": exhausted,
         "runs_commands": [{"command": exhausted, "link": None}]},
        {"signal": "orphan_writes", "bound": "max", "limit": 5.0, "value": 1, "state": "ok",
         "runs_link": None, "runs_command": orphans,
         "runs_commands": [{"command": orphans, "link": None}]},
    ]


def test_each_breach_leads_to_its_runs(db: Path) -> None:
    """`BREACH exhaustion_rate 4.2% > max 3.0%` led nowhere: each breach is followed by the
    command that lists the runs behind it and, with the dashboard's address, their page; the
    command lists exactly those runs."""
    cases = {
        "--max-exhaustion-rate": ("0.05", "--exhausted --sort culprit_share:desc",
                                  "exhausted=yes&sort=culprit_share&order=desc"),
        "--max-client-timeout-rate": ("0.25", "--step-class client_timeout",
                                      "class=client_timeout"),
        "--max-upstream-error-rate": ("0.1", "--step-class upstream_error",
                                      "class=upstream_error"),
        "--max-reconciliation-rate": ("0.02", "--writes reconciled", "writes=reconciled"),
        "--min-reconciliation-rate": ("0.9", "--writes uncertain", "writes=uncertain"),
        "--max-orphan-writes": ("0", "--writes orphan", "writes=orphan"),
        "--min-runs": ("4", "", ""),
    }
    window = "--since 2026-11-23T10:00:00Z --until 2026-11-23T11:00:00Z"
    for option, (limit, options, search) in cases.items():
        result = check(db, option, limit, "--window", "1h", "--until", UNTIL,
                       "--dashboard-url", "http://dash.example:8501/")
        assert result.exit_code == 1, (option, result.output)
        lines = result.output.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("BREACH"))
        command = f"budgetscope --db {db} report runs {options} {window} --format table"
        assert lines[at + 1] == "        runs: " + command.replace("  ", " "), lines
        link = ("http://dash.example:8501/runs?range=custom&since=2026-11-23T10:00:00Z"
                "&until=2026-11-23T11:00:00Z" + (f"&{search}" if search else ""))
        assert lines[at + 2] == f"        open: {link}", lines
        listed = CliRunner().invoke(cli, [*shlex.split(command)[1:], "--format", "json"])
        assert listed.exit_code == 0, listed.output
        assert json.loads(listed.output), (option, "the command lists the runs behind it")
    unlinked = check(db, "--max-orphan-writes", "0", "--window", "1h", "--until", UNTIL)
    assert "        runs: " in unlinked.output and "open: " not in unlinked.output
    bad = check(db, "--max-orphan-writes", "0", "--dashboard-url", "dash:8501")
    assert bad.exit_code == 2 and "is not an http:// or https:// address" in bad.output


def test_usage_and_database_errors_exit_2(db: Path, tmp_path: Path) -> None:
    assert check(db, "--window", "1h").exit_code == 2  # no threshold
    assert check(db, "--max-exhaustion-rate", "1.5").exit_code == 2  # not a fraction
    assert check(db, "--max-orphan-writes", "0", "--window", "7x").exit_code == 2
    assert check(db, "--max-orphan-writes", "0", "--until", "yesterday").exit_code == 2
    missing = check(tmp_path / "none.duckdb", "--max-orphan-writes", "0")
    assert missing.exit_code == 2 and "no database at" in missing.output
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes(b"this is not a database" * 100)
    result = check(broken, "--max-orphan-writes", "0")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output


def test_one_threshold_reads_as_one(db: Path) -> None:
    """Regression: a single threshold printed "all 1 thresholds hold"."""
    held = check(db, "--max-exhaustion-rate", "0.5", "--window", "1h", "--until", UNTIL)
    assert held.exit_code == 0, held.output
    assert held.output.splitlines()[-1] == "the threshold holds"
    breached = check(db, "--max-exhaustion-rate", "0.05", "--window", "1h", "--until", UNTIL)
    assert breached.output.splitlines()[-1] == "1 of 1 threshold breached"
