"""Every output that can reach a terminal is inert there, whatever the spans named: each
`report` format, `budgets list`, `run`, `check` and error messages, on the file and through
the server's read API. The commands run as real processes whose standard output and error are
a pseudo-terminal, and the bytes the terminal received are searched for anything it would act
on (a window title, a screen clear, a hyperlink, C1 controls, bidi overrides). The same
report redirected to a pipe keeps the data, byte for byte what it writes to a file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from tests.support.hostile_names import ESCAPES, hostile_names_db
from tests.support.serve import start_serve, stop
from tests.support.terminal_capture import CLI, on_terminal
from tests.support.terminal_capture import assert_inert as _assert_inert
from tests.support.terminal_capture import cli_env as _env

# A name for `check --agent` and an unknown run id: the escapes reach the output through them.
HOSTILE_ARGUMENT = "agent\x1b]0;owned\x07\u202eevil"


COMMANDS = [
    ("report", "runs"),
    ("report", "runs", "--format", "json"),
    ("report", "runs", "--format", "table"),
    ("report", "weekly"),
    ("report", "failures"),
    ("report", "attribution"),
    ("report", "reconciliation"),
    ("report", "cost"),
    ("report", "cost", "--format", "table"),
    ("report", "cost-attribution", "--format", "table"),
    ("report", "models", "--format", "json"),
    ("budgets", "list"),
    ("check", "--max-exhaustion-rate", "0.5", "--window", "1000d", "--agent", HOSTILE_ARGUMENT),
    ("run", HOSTILE_ARGUMENT),  # an error naming what was asked for
    ("report", "runs", "--agent", HOSTILE_ARGUMENT),  # a note naming every agent there is
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    db, run_ids = hostile_names_db(tmp_path_factory.mktemp("terminal"))
    import duckdb
    con = duckdb.connect(db)
    try:  # a declaration stored before names were checked
        con.execute("INSERT INTO declared_budgets (scope, agent, budget_ms, declared_at) "
                    "VALUES ('agent', ?, 1000, now())", [ESCAPES])
    finally:
        con.close()
    return db, run_ids


@pytest.mark.slow
@pytest.mark.parametrize("arguments", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_on_the_file_a_terminal_receives_nothing_it_acts_on(hostile, arguments) -> None:
    db, _ = hostile
    status, text = on_terminal(db, *arguments)
    assert text.strip(), status
    _assert_inert(text)


def test_the_run_summary_on_a_terminal(hostile) -> None:
    db, run_ids = hostile
    status, text = on_terminal(db, "run", run_ids[-1])
    assert status == 0
    _assert_inert(text)
    assert "link" in text


def test_a_pipe_keeps_the_data(hostile) -> None:
    db, _ = hostile
    piped = subprocess.run([*CLI, "--db", db, "report", "runs"], capture_output=True,
                           env=_env(), timeout=120)
    assert piped.returncode == 0
    assert ESCAPES.encode() in piped.stdout.replace(b'"', b"")  # the name, quoted as CSV does
    assert piped.stdout == CliRunner().invoke(cli, ["--db", db, "report", "runs"]).stdout_bytes


@pytest.mark.slow
def test_through_the_server_a_terminal_receives_nothing_it_acts_on(hostile, tmp_path: Path
                                                                    ) -> None:
    db, run_ids = hostile
    served = tmp_path / "served.duckdb"
    shutil.copyfile(db, served)
    process, _ = start_serve(served, "--no-ui")
    try:
        for arguments in (("report", "runs"), ("report", "weekly"), ("budgets", "list"),
                          ("run", run_ids[-1]), ("run", HOSTILE_ARGUMENT)):
            status, text = on_terminal(str(served), *arguments)
            assert text.strip(), arguments
            _assert_inert(text)
        piped = subprocess.run([*CLI, "--db", str(served), "report", "runs"],
                               capture_output=True, env=_env(), timeout=120)
        assert ESCAPES.encode() in piped.stdout.replace(b'"', b"")
    finally:
        code, _, err = stop(process)
    assert code == 0, err


@pytest.mark.parametrize("name", ["agent\x1b]0;owned\x07", "a\x9b2Jb", "x\u202egnp.exe",
                                  "iso\u2066late", "nul\x00"])
def test_a_name_a_terminal_would_act_on_cannot_be_declared(name: str) -> None:
    from store import DeclarationError, checked_agent, checked_step_key

    with pytest.raises(DeclarationError, match="control characters or bidirectional"):
        checked_agent(name)
    with pytest.raises(DeclarationError, match="control characters or bidirectional"):
        checked_step_key(f"tool:{name}")
    assert checked_agent("support-agent é") == "support-agent é"
