"""Extreme but valid dates and windows: an answer (every run, or none) or a usage error with
exit status 2, never an HTTP 500 or a traceback; and `check` exits 2 whenever it could not check
(1 is a breach to cron). Run starts are 64-bit nanoseconds (1677 to 2262): a bound beyond that
holds every run or none. On the file through click, through the server's read API (the real
ServedCommands over an owner of the file, and POST /cli over HTTP), and on the dashboard."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from budgetscope.cli import cli
from budgetscope.read_api_answer import read_answer
from budgetscope.server.cli_endpoint import PATH, CliEndpoint
from budgetscope.server.read_api import ServedCommands
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner
from tests.support import ui
from tests.support.trace_builder import TraceBuilder, open_db, store

RUNS = 3


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    b = TraceBuilder(seed=34)
    for index in range(RUNS):
        run = b.run(index * 20_000, index * 20_000 + 12_000, 10_000,
                    gen__ai_agent_name="support-agent", budget_run_outcome="exhausted")
        b.step(run, "tool", "fetch_report", index * 20_000, index * 20_000 + 11_000,
               **{"budget.outcome": "client_timeout"})
    folder = tmp_path_factory.mktemp("extreme-dates")
    con = open_db(folder, "dates.duckdb")
    store(con, b.finished())
    con.close()
    return str(folder / "dates.duckdb")


def _rows(data: bytes) -> int:
    return len(list(csv.reader(io.StringIO(data.decode())))) - 1


ANSWERED = [  # (arguments, runs in the answer)
    (["report", "runs", "--since", "0001-01-01"], RUNS),
    (["report", "runs", "--until", "9999-12-31"], RUNS),
    (["report", "runs", "--since", "0001-01-01", "--until", "9999-12-31T23:59:59Z"], RUNS),
    (["report", "runs", "--since", "9999-12-30"], 0),
    (["report", "runs", "--until", "0001-01-02"], 0),
    (["report", "runs", "--since", "1000-01-01", "--until", "1600-01-01"], 0),
    (["report", "weekly", "--since", "0001-01-01", "--until", "9999-12-31"], None),
    (["report", "attribution", "--until", "0001-01-02"], 0),
]


@pytest.mark.parametrize(("arguments", "runs"), ANSWERED,
                         ids=[" ".join(a[1:]) for a, _ in ANSWERED])
def test_on_the_file_an_answer(db: str, arguments: list[str], runs: int | None) -> None:
    result = CliRunner().invoke(cli, ["--db", db, *arguments])
    assert result.exit_code == 0, result.output
    if runs is not None:
        assert _rows(result.stdout_bytes) == runs


USAGE = [
    ["report", "runs", "--since", "0001-01-01T00:00:00+01:00"],
    ["report", "runs", "--until", "10000-01-01"],
    ["check", "--max-exhaustion-rate", "0.5", "--window", "1000000000d"],
    ["check", "--max-exhaustion-rate", "0.5", "--until", "0001-01-01T00:30:00+01:00"],
]


@pytest.mark.parametrize("arguments", USAGE, ids=[" ".join(a[1:]) for a in USAGE])
def test_on_the_file_a_usage_error(db: str, arguments: list[str]) -> None:
    result = CliRunner().invoke(cli, ["--db", db, *arguments])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.exception is None or \
        isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("until", ["0001-01-02", "0001-01-01", "9999-12-31"])
def test_check_at_the_ends_of_time_checks(db: str, until: str) -> None:
    result = CliRunner().invoke(cli, ["--db", db, "check", "--max-exhaustion-rate", "0.5",
                                      "--window", "999999999d", "--until", until])
    # A window of every run or none: checked (a breach is a breach), never "could not".
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_check_exits_2_when_it_cannot_read(tmp_path: Path) -> None:
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes(b"this is not a database" * 100)
    result = CliRunner().invoke(cli, ["--db", str(broken), "check",
                                      "--max-exhaustion-rate", "0.5"])
    assert result.exit_code == 2, result.output


@pytest.fixture(scope="module")
def owner(db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseOwner]:
    copy = tmp_path_factory.mktemp("extreme-dates-served") / "served.duckdb"
    copy.write_bytes(Path(db).read_bytes())
    held = DatabaseOwner(copy)
    yield held
    held.close()


@pytest.mark.slow
@pytest.mark.parametrize(("arguments", "runs"), ANSWERED,
                         ids=[" ".join(a[1:]) for a, _ in ANSWERED])
def test_through_the_read_api_the_same_answer(owner: DatabaseOwner, db: str,
                                              arguments: list[str], runs: int | None) -> None:
    served = ServedCommands(owner, group=cli, seconds=60).run(arguments)
    assert served.status == 0, served.stderr
    assert served.stdout == CliRunner().invoke(cli, ["--db", db, *arguments]).stdout_bytes


def test_over_http_never_a_500(owner: DatabaseOwner) -> None:
    commands = ServedCommands(owner, group=cli, seconds=60)
    receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0, token="t" * 16,
                                                routes=lambda parts: {
                                                    PATH: CliEndpoint(commands, parts.token)}))
    receivers.start()
    try:
        for arguments, expected in ([["report", "runs", "--since", "0001-01-01"], 0],
                                    [["check", "--max-exhaustion-rate", "0.5", "--until",
                                      "0001-01-02"], 0],
                                    *[[usage, 2] for usage in USAGE]):
            status, _, body = _send_token(receivers, arguments)
            assert status == 200, (arguments, body)
            code, _, err = read_answer(body.splitlines())
            assert code == expected, (arguments, err)
    finally:
        receivers.stop(10)


def _send_token(receivers: Receivers, arguments: list[str]) -> tuple[int, dict, bytes]:
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(receivers.http_endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        connection.request("POST", PATH, body=json.dumps({"argv": arguments}).encode(),
                           headers={"Content-Type": "application/json",
                                    "Authorization": "Bearer " + "t" * 16})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("params", [{"range": "custom", "since": "0001-01-01"},
                                    {"range": "custom", "since": "0001-01-01",
                                     "until": "0001-01-03"},
                                    {"range": "custom", "until": "9999-12-31"}])
def test_the_dashboard_draws_at_the_ends_of_time(db: str, params: dict[str, str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUDGETSCOPE_DB", db)
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
