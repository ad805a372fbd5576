"""What the CLI says when something is wrong, and with which exit status: every usage error of
every command exits 2 (simulate's exited 1); a taken port is said before any address is printed
and leaves no file behind (dashboard printed someone else's address, serve an empty database
and a gRPC core log line); `run` at 80 columns keeps each label with its value and gives step
names their width before the recogniser column, and leads to the run's page."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from budgetscope.cli import cli
from budgetscope.commands.ports import hold_port, require_free
from budgetscope.fail import Fail
from tests.support import ui


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> str:
    return ui.sample_db(tmp_path_factory)


def invoke(*arguments: str) -> Result:
    env = {"BUDGETSCOPE_SERVER": None, "BUDGETSCOPE_BACKEND": None, "BUDGETSCOPE_TOKEN": None,
           "BUDGETSCOPE_DASHBOARD_URL": None}
    return CliRunner().invoke(cli, list(arguments), env=env, prog_name="budgetscope")


# (arguments after --db, what the message says): one or more usage errors of every command.
USAGE_ERRORS = [
    (["report", "nosuch"], "unknown report 'nosuch'"),
    (["report", "runs", "--since", "soon"], "--since: 'soon'"),
    (["report", "runs", "--format", "xml"], "'--format'"),
    (["report", "runs", "--sort", "colour"], "cannot sort by 'colour'"),
    (["report", "runs", "--outcome", "finished"], "'--outcome'"),
    (["report", "runs", "--culprit", "tool:fetch_reprot"],
     "--culprit 'tool:fetch_reprot': no step of that key in this database"),
    (["report", "runs", "--holder", "fetch_report"],
     "--holder 'fetch_report': no step of that key in this database"),
    (["report", "runs", "--step", "tool:nope"], "--step 'tool:nope'"),
    (["report", "runs", "--step-class", "timeout"], "'--step-class'"),
    (["report", "runs", "--writes", "lost"], "'--writes'"),
    (["report", "weekly", "--holder", "tool:fetch_report"], "apply to the runs report only"),
    (["report", "runs", "--width", "40"], "40 is not in the range 80<=x<=400"),
    (["run", "0" * 32, "--width", "60"], "60 is not in the range 80<=x<=400"),
    (["run", "0" * 32, "--dashboard-url", "dash:8501"], "is not an http:// or https://"),
    (["check"], "give at least one threshold"),
    (["check", "--max-orphan-writes", "0", "--window", "7x"], "'7x'"),
    (["check", "--max-exhaustion-rate", "2"], "'--max-exhaustion-rate'"),
    (["check", "--max-orphan-writes", "0", "--agent", "nobody"], "known agents:"),
    (["simulate", "--cap", "fetch_report"], "is not NAME=DURATION"),
    (["simulate", "--cap", "fetch_report=9"], "is not a duration"),
    (["simulate", "--deadline", "soon"], "--deadline: 'soon' is not a duration"),
    (["simulate", "--cap", "tool:nope=9s"], "--cap: no step named tool:nope"),
    (["simulate", "--since", "yesterday"], "--since: 'yesterday'"),
    (["simulate", "--agent", "nobody"], "known agents:"),
    (["budgets", "set", "billing-agent", "45"], "has no unit"),
    (["budgets", "cap", "tool:fetch_report"], "Missing argument"),
    (["budgets", "unset"], "unset takes AGENT, or --default"),
    (["ingest", "no/such/file.json"], "no such file or folder"),
    (["retain"], "Missing option '--days'"),
    (["retain", "--days", "0"], "'--days'"),
    (["demo", "--port", "0"], "'--port'"),
    (["dashboard", "--port", "70000"], "'--port'"),
    (["dashboard", "--host", "0.0.0.0"], "with no --token"),
    (["dashboard", "--token", "short"], "the token"),
    (["serve", "--ui-port", "0"], "'--ui-port'"),
    (["serve", "--host", "0.0.0.0"], "with no --token"),
    (["nosuch"], "No such command 'nosuch'"),
]


@pytest.mark.parametrize(("arguments", "said"), USAGE_ERRORS, ids=lambda a: " ".join(a)
                         if isinstance(a, list) else "")
def test_every_usage_error_of_every_command_exits_2(sample: str, tmp_path: Path,
                                                    arguments: list[str], said: str) -> None:
    db = str(tmp_path / "fresh.duckdb") if arguments[0] in ("demo", "serve") else sample
    result = invoke("--db", db, *arguments)
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert said in result.output, result.output
    assert "Traceback" not in result.output
    assert not Path(tmp_path / "fresh.duckdb").exists()


def test_an_unknown_culprit_names_the_step_keys_there_are(sample: str) -> None:
    result = invoke("--db", sample, "report", "runs", "--culprit", "gpt-4o-mini")
    assert result.exit_code == 2
    assert re.search(r"known: .*model:gpt-4o-mini.*tool:fetch_report", result.output)


@pytest.fixture()
def taken() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_a_taken_dashboard_port_is_said_before_any_address(sample: str, taken: int) -> None:
    result = invoke("--db", sample, "dashboard", "--port", str(taken))
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: port {taken} on 127.0.0.1 is taken"), result.output
    assert "choose another with --port N" in result.output
    assert "http://" not in result.output and "dashboard on" not in result.output


def test_a_taken_demo_port_loads_nothing(tmp_path: Path, taken: int) -> None:
    db = tmp_path / "demo.duckdb"
    result = invoke("demo", "--db", str(db), "--port", str(taken))
    assert result.exit_code == 1, result.output
    assert f"port {taken} on 127.0.0.1 is taken" in result.output
    assert "make demo PORT=N" in result.output
    assert not db.exists()


@pytest.mark.parametrize("option", ["--otlp-http-port", "--otlp-grpc-port", "--ui-port"])
def test_a_taken_serve_port_is_said_and_leaves_no_file(tmp_path: Path, taken: int,
                                                       option: str) -> None:
    """serve on a taken OTLP port left an empty database file and printed a gRPC core log
    line: every port is asked for before the file is opened."""
    db = tmp_path / "new.duckdb"
    ports = {"--otlp-http-port": "0", "--otlp-grpc-port": "0", "--ui-port": "1"}
    ports[option] = str(taken)
    free = [part for key, value in ports.items() if key != "--ui-port" or option == key
            for part in (key, value)]
    result = invoke("--db", str(db), "serve", *free, *([] if option == "--ui-port"
                                                       else ["--no-ui"]))
    assert result.exit_code == 1, result.output
    assert f"port {taken} on 127.0.0.1 is taken" in result.output
    assert option in result.output  # the option to change
    assert "http://" not in result.output and "owns" not in result.output
    assert not db.exists() and not Path(f"{db}.wal").exists()


def _run(sample: str, run_id: str, *extra: str) -> list[str]:
    result = invoke("--db", sample, "run", run_id, "--width", "80", *extra)
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_run_at_80_columns_keeps_labels_with_values_and_names_whole(sample: str) -> None:
    """At 80 columns `run` wrapped 'started' away from its date, cut step names to 11
    characters while keeping 12 for the recogniser column, and wrote '2 refuseds'."""
    run_id = ui.exhausted_run(sample)
    lines = _run(sample, run_id)
    for line in lines:
        # a line that is one word too long for any (an address, a path in a command) is
        # copied whole, never cut
        if " " in line.strip().removesuffix(" \\"):
            assert len(line) <= 80, line
    header = "\n".join(lines[:4])
    for label in ("run", "agent", "started", "outcome", "exhausted", "budget", "elapsed",
                  "utilisation", "overrun"):
        # a label is never the last word of a line: its value follows it on the same line
        assert not re.search(rf"(^|  ){label}$", header, re.M), header
    assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", header)
    rows = [line for line in lines if re.match(r"^[CHL ]{2} +#\d", line)]
    assert rows and not [row for row in rows if "…" in row.split("[")[0]], rows
    assert "(what recognised each step: --width" in "\n".join(lines)
    wide = _run(sample, run_id, "--width", "140")
    assert any(row.rstrip().endswith(("budget", "otel_genai", "http")) for row in wide
               if re.match(r"^[CHL ]{2} +#\d", row))


def test_run_prints_the_next_steps_commands_and_the_run_views_address(sample: str) -> None:
    run_id = ui.exhausted_run(sample)
    lines = _run(sample, run_id, "--dashboard-url", "http://dash.example:8501/")
    text = "\n".join(lines)
    assert f"Run view       http://dash.example:8501/run?run={run_id}" in lines
    joined = re.sub(r" \\\n\s+", " ", text)  # a command continued with ` \` is one
    command = re.search(r"budgetscope --db \S+ simulate --cap \S+=\S+ --agent \S+ "
                        r"--since \S+ --until \S+ --format table", joined)
    assert command, text
    # the command runs as printed, and What if's address says the same scenario
    arguments = command.group(0).split()[1:]
    assert invoke(*arguments).exit_code == 0
    key, cap = re.search(r"--cap (\S+)=(\S+)", command.group(0)).groups()
    assert re.search(rf"http://dash.example:8501/simulate\?range=custom&since=\S+&until=\S+"
                     rf"&agent=\S+&cap={re.escape(key)}=\d+", text), text
    plain = _run(sample, run_id)
    assert not [line for line in plain if "http://" in line]  # no address, no link


def test_the_readmes_first_cli_example_fits_80_columns(sample: str) -> None:
    """The README's first CLI example printed 290-character lines: each command of its first
    shell block with a budgetscope command prints lines of at most 80 characters (the width
    when the output is not a terminal; a terminal's is at least that)."""
    import shlex

    readme = (ui.REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    first = next(block for block in blocks if "budgetscope --db" in block)
    commands = [shlex.split(line.split("#", 1)[0]) for line in first.splitlines()
                if line.startswith("budgetscope ")]
    assert commands and commands[0][3:5] == ["report", "runs"]
    for command in commands:
        arguments = [sample if word == "budgetscope-demo.duckdb" else word
                     for word in command[1:]]
        result = invoke(*arguments)
        assert result.exit_code == 0, (command, result.output)
        # but a line that is one word too long for any (a long path in a command, continued
        # with ` \`), which is copied whole, never cut
        widest = max(len(line) for line in result.output.splitlines()
                     if " " in line.strip().removesuffix(" \\"))
        assert widest <= 80, (command, widest, result.output)


def test_a_held_port_is_given_to_nobody_until_it_is_let_go() -> None:
    """serve starts its receivers before its dashboard: the dashboard's port is held meanwhile,
    so that a receiver on port 0 cannot be given it (CI saw `--ui-port N --otlp-grpc-port 0`
    give gRPC port N, and the dashboard then could not start). Held, the port cannot be bound
    even as a server binds (SO_REUSEADDR, which a bound socket that does not listen would
    allow); let go, it can at once."""
    with socket.socket() as pick:
        pick.bind(("127.0.0.1", 0))
        port = pick.getsockname()[1]
    held = hold_port("127.0.0.1", port, "the dashboard", "choose another")
    try:
        with pytest.raises(Fail, match=f"port {port} on 127.0.0.1 is taken"):
            require_free("127.0.0.1", port, "the OTLP/gRPC receiver", "choose another")
    finally:
        held.close()
    require_free("127.0.0.1", port, "the dashboard", "choose another")
