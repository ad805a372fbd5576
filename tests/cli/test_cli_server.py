"""The CLI against a running `budgetscope serve` ("The CLI in production"): report,
run, check and simulate go to the server's read API (POST /cli) when serve holds the file, or
with --server URL, and print the same bytes with the same exit status as on the file.

A real serve subprocess on free ports owns a real DuckDB file loaded with the bundled sample;
the same commands run on a copy of that file taken before the server opened it."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import pytest
from click.testing import CliRunner, Result

from budgetscope.cli import cli
from budgetscope.config import SAMPLE_TRACES
from budgetscope.read_api_answer import ANSWER_TYPE, read_answer
from tests.support.serve import CLI, start_serve, stop

# slow, left out of make test-fast: a real `budgetscope serve` on a copy of the sample, made
# once for the module (13 s of set-up on 2 loaded cores).
pytestmark = pytest.mark.slow

TOKEN = "read-api-token-0123"


class Setup:
    def __init__(self, direct: Path, served: Path, announced: dict, run_ids: list[str]) -> None:
        self.direct, self.served, self.announced, self.run_ids = direct, served, announced, \
            run_ids

    @property
    def base_url(self) -> str:
        url = urlsplit(self.announced["cli"])
        return f"{url.scheme}://{url.netloc}"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("read_api")
    direct = folder / "direct.duckdb"
    loaded = CliRunner().invoke(cli, ["--db", str(direct), "ingest", "--no-progress",
                                      str(SAMPLE_TRACES)])
    assert loaded.exit_code == 0, loaded.output
    con = duckdb.connect(str(direct), read_only=True)
    try:
        run_ids = [row[0] for row in con.execute(
            "(SELECT run_id FROM runs WHERE exhausted ORDER BY run_id LIMIT 1) UNION ALL "
            "(SELECT run_id FROM runs WHERE NOT exhausted ORDER BY run_id LIMIT 1)").fetchall()]
    finally:
        con.close()
    served = folder / "served.duckdb"
    shutil.copyfile(direct, served)  # copied before the server opens it: the same data
    process, announced = start_serve(served, "--no-ui", token=TOKEN)
    try:
        yield Setup(direct, served, announced, run_ids)
    finally:
        code, _, err = stop(process)
        assert code == 0, err


def invoke(*arguments: str, token: str | None = TOKEN) -> Result:
    env = {"BUDGETSCOPE_TOKEN": token, "BUDGETSCOPE_SERVER": None, "BUDGETSCOPE_BACKEND": None}
    return CliRunner().invoke(cli, list(arguments), env=env, prog_name="budgetscope")


def same(through_server: Result, on_file: Result, setup: Setup | None = None) -> None:
    """The same bytes and exit status; the commands an answer prints (check's and run's
    next steps) name the file they were run on, which here is the server's own copy."""
    assert through_server.exception is None or isinstance(through_server.exception,
                                                          SystemExit), through_server.exc_info
    expected_out, expected_err = on_file.stdout_bytes, on_file.stderr_bytes
    if setup is not None:
        here, there = str(setup.direct).encode(), str(setup.served).encode()
        expected_out = expected_out.replace(here, there)
        expected_err = expected_err.replace(here, there)
    assert through_server.stdout_bytes == expected_out
    assert through_server.stderr_bytes == expected_err
    assert through_server.exit_code == on_file.exit_code


COMMANDS = [
    *[["report", name, "--format", form] for name in ("weekly", "runs", "attribution")
      for form in ("csv", "json", "table")],
    ["report", "runs", "--since", "2026-10-27", "--until", "2026-10-29", "--agent",
     "billing-agent", "--exhausted", "--sort", "utilisation:desc", "--limit", "5"],
    ["report", "failures"], ["report", "utilisation", "--format", "table"],
    ["report", "reconciliation", "--format", "json"],
    ["report", "runs", "--agent", "no-such-agent"],  # a usage error naming the agents, exit 2
    ["check", "--until", "2026-12-01", "--window", "60d", "--max-exhaustion-rate", "0.01"],
    ["check", "--until", "2026-12-01", "--window", "60d", "--max-exhaustion-rate", "0.9",
     "--format", "json"],
    ["simulate", "--cap", "fetch_report=9s"],
    ["simulate", "--cap", "fetch_report=9s", "--deadline", "20s", "--format", "table"],
    ["simulate", "--view", "tools", "--format", "json"],
    ["simulate", "--since", "2030-01-01"],  # no runs: exit 1 with the message
    ["report", "nosuch"],  # a usage error, exit 2, caught before asking the server
    ["run", "0" * 32],  # no such run: exit 1
]


@pytest.mark.parametrize("arguments", COMMANDS, ids=" ".join)
def test_held_file_answers_through_the_server_byte_for_byte(setup: Setup,
                                                            arguments: list[str]) -> None:
    through_server = invoke("--db", str(setup.served), *arguments)
    on_file = invoke("--db", str(setup.direct), *arguments)
    same(through_server, on_file, setup)
    if arguments[:2] == ["check", "--until"] and arguments[-1] == "0.01":
        assert on_file.exit_code == 1 and b"BREACH" in on_file.stdout_bytes  # a real breach


def test_run_views_through_the_server(setup: Setup) -> None:
    for run_id in setup.run_ids:
        for extra in ([], ["--width", "100"]):
            same(invoke("--db", str(setup.served), "run", run_id, *extra),
                 invoke("--db", str(setup.direct), "run", run_id, *extra), setup)


def test_budgets_list_with_explicit_server(setup: Setup) -> None:
    same(invoke("--server", setup.base_url, "budgets", "list", "--format", "json"),
         invoke("--db", str(setup.direct), "budgets", "list", "--format", "json"))


def test_explicit_server_needs_no_local_file(setup: Setup, tmp_path: Path) -> None:
    nowhere = tmp_path / "absent.duckdb"
    for arguments in (["report", "weekly"], ["run", setup.run_ids[0]],
                      ["simulate", "--cap", "fetch_report=9s", "--format", "table"]):
        same(invoke("--db", str(nowhere), "--server", setup.base_url, *arguments),
             invoke("--db", str(setup.direct), *arguments), setup)
    assert not nowhere.exists()


def test_out_is_written_by_the_client(setup: Setup, tmp_path: Path) -> None:
    remote, local = tmp_path / "remote.csv", tmp_path / "local.csv"
    through_server = invoke("--db", str(setup.served), "report", "weekly", "--out", str(remote))
    on_file = invoke("--db", str(setup.direct), "report", "weekly", "--out", str(local))
    same(through_server, on_file)
    assert remote.read_bytes() == local.read_bytes() and local.stat().st_size > 0


def test_wrong_or_missing_token_is_a_clear_error(setup: Setup) -> None:
    """A missing token is asked for; a wrong one was told to "pass --token": it is said to be
    rejected."""
    for token, said in ((None, "requires its bearer token: pass --token"),
                        ("wrong-token", "rejected the token given (--token or "
                                        "BUDGETSCOPE_TOKEN)")):
        result = invoke("--db", str(setup.served), "report", "weekly", token=token)
        assert result.exit_code == 1, result.output
        assert said in result.stderr, result.stderr
        assert result.stdout_bytes == b""
        checked = invoke("--server", setup.base_url, "check", "--max-exhaustion-rate", "0.5",
                         token=token)
        assert checked.exit_code == 2  # a check that could not run is neither pass nor breach
        assert said in checked.stderr
        budgets = invoke("--server", setup.base_url, "budgets", "list", token=token)
        assert budgets.exit_code != 0 and said in budgets.output + budgets.stderr


def test_unreachable_server_is_a_clear_error() -> None:
    with socket_port() as port:
        result = invoke("--server", f"http://127.0.0.1:{port}", "report", "weekly")
    assert result.exit_code == 1 and "cannot reach the server" in result.stderr


def test_server_option_is_checked(setup: Setup) -> None:
    result = invoke("--server", "127.0.0.1:4318", "report", "weekly")
    assert result.exit_code == 2 and "--server" in result.stderr
    refused = invoke("--server", setup.base_url, "ingest", str(SAMPLE_TRACES))
    assert refused.exit_code == 2 and "--server applies to" in refused.stderr


def post_cli(setup: Setup, payload: object, token: str | None = TOKEN,
             content_type: str = "application/json") -> tuple[int, dict]:
    url = urlsplit(setup.announced["cli"])
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    try:
        headers = {"Content-Type": content_type}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        connection.request("POST", url.path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        if response.status == 200 and response.getheader("Content-Type") == ANSWER_TYPE:
            status, out, err = read_answer(data.splitlines())
            return 200, {"status": status, "stdout": out, "stderr": err}
        return response.status, json.loads(data or b"{}")
    finally:
        connection.close()


@pytest.mark.parametrize("argv", [
    ["ingest", "/etc/passwd"], ["retain", "--days", "1"], ["serve"], ["demo"],
    ["budgets", "set", "--default", "1s"], ["dashboard"],
    ["report", "weekly", "--out", "/tmp/written-by-the-server.csv"],
    ["report", "weekly", "--out=/tmp/written-by-the-server.csv"],
    ["report", "weekly", "--db", "/etc/passwd"], ["report", "--help"],
    [], "report weekly", [["report"]],
])
def test_only_read_only_commands_are_run(setup: Setup, argv: object) -> None:
    status, answer = post_cli(setup, {"argv": argv})
    assert status == 403 if isinstance(argv, list) and argv and isinstance(argv[0], str) \
        else status in (400, 403)
    assert "error" in answer and "status" not in answer
    assert not Path("/tmp/written-by-the-server.csv").exists()


def test_read_api_refuses_without_token_json_or_a_valid_body(setup: Setup) -> None:
    assert post_cli(setup, {"argv": ["report", "weekly"]}, token=None)[0] == 401
    assert post_cli(setup, {"argv": ["report", "weekly"]}, token="nope")[0] == 401
    assert post_cli(setup, b"argv=report", content_type="text/plain")[0] == 415
    assert post_cli(setup, b"{not json")[0] == 400
    assert post_cli(setup, {"argv": ["report", "weekly"], "code": "x"})[0] == 400
    assert post_cli(setup, b"[" * 70_000 + b"]" * 70_000)[0] == 413
    status, answer = post_cli(setup, {"argv": ["report", "weekly"]})
    assert status == 200 and answer["status"] == 0 and answer["stdout"]


def test_the_real_command_line_uses_the_server(setup: Setup) -> None:
    """As a user runs it: a separate process, the file held, the token from the environment."""
    env = {"BUDGETSCOPE_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"}
    outputs = []
    for db in (setup.served, setup.direct):
        done = subprocess.run([*CLI, "--db", str(db), "report", "attribution", "--format",
                               "table"], capture_output=True, env=env, timeout=300)
        outputs.append((done.returncode, done.stdout, done.stderr))
    assert outputs[0] == outputs[1] and outputs[0][0] == 0 and b"exhausted runs" in \
        outputs[0][1]


class socket_port:
    """A free port nobody listens on, for as long as the block lasts."""

    def __enter__(self) -> int:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        return int(self._socket.getsockname()[1])

    def __exit__(self, *_: object) -> None:
        self._socket.close()


def test_concurrent_calls_keep_their_own_output(setup: Setup) -> None:
    """Commands run side by side in the server's threads: each answer holds its own bytes."""
    calls = [["report", "weekly"], ["report", "runs", "--format", "json"],
             ["run", setup.run_ids[0]], ["simulate", "--cap", "fetch_report=9s"],
             ["report", "attribution", "--format", "table"], ["run", setup.run_ids[1]]]
    # what the commands print name the file they read: here the server's own copy
    expected = [invoke("--db", str(setup.direct), *argv).stdout_bytes.replace(
        str(setup.direct).encode(), str(setup.served).encode()) for argv in calls]
    with ThreadPoolExecutor(len(calls)) as pool:
        answers = list(pool.map(lambda argv: post_cli(setup, {"argv": argv}), calls))
    for (status, answer), wanted in zip(answers, expected, strict=True):
        assert status == 200 and answer["status"] == 0
        assert answer["stdout"] == wanted
