"""The read API's bounds (POST /cli): its pool is its own and bounded, so that calls beyond it
are answered 503 with Retry-After while exports and health checks go on being answered; a CSV
or JSON report is streamed whatever its size (the same bytes as on the file), a client that
leaves stops it; and what a command builds whole is bounded by constants (rows read, rows
answered), past which it is refused with a message saying how to narrow it.

In process: real receivers on 127.0.0.1 over a real DuckDB file, the real CliEndpoint and
ServedCommands; the pool is filled with real threads that wait on an event, standing for slow
reports, so that the moment it is full is certain rather than timed."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from budgetscope.cli import cli
from budgetscope.read_api_answer import ANSWER_TYPE, read_answer
from budgetscope.server.cli_endpoint import PATH, CliEndpoint
from budgetscope.server.operations import OperatorPages
from budgetscope.server.read_api import ServedCommands
from ingest.receivers.auth import BearerToken
from ingest.receivers.bounded_pool import BoundedPool, PoolFull
from ingest.receivers.http_routes import Endpoint
from ingest.receivers.service import ReceiverConfig, ReceiverParts, Receivers
from store import DatabaseOwner, connect
from tests.support import ui
from tests.support.receivers import raw_request

TOKEN = "bounds-token"


def test_a_full_pool_refuses_and_frees_its_slots() -> None:
    pool = BoundedPool(1, 1, "test-bounded")
    release = threading.Event()
    try:
        running = [pool.submit(release.wait, 30) for _ in range(2)]
        with pytest.raises(PoolFull):
            pool.submit(lambda: None)
        release.set()
        for future in running:
            future.result(30)
        assert pool.submit(lambda: 7).result(30) == 7
    finally:
        release.set()
        pool.shutdown()


@pytest.fixture
def receivers(tmp_path: Path) -> Iterator[tuple[Receivers, CliEndpoint]]:
    owner = DatabaseOwner(tmp_path / "bounds.duckdb")
    made: list[CliEndpoint] = []

    def routes(parts: ReceiverParts) -> dict[str, Endpoint]:
        made.append(CliEndpoint(ServedCommands(owner, group=cli, seconds=60), parts.token))
        pages = OperatorPages(parts.writer, parts.counters, parts.token)
        return {PATH: made[0], **pages.routes()}

    receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0, token=TOKEN,
                                                routes=routes), derive=True)
    (endpoint,) = made
    receivers.start()
    try:
        yield receivers, endpoint
    finally:
        receivers.stop(10)
        owner.close()


def _send(receivers: Receivers, method: str, path: str, body: bytes | None,
          content_type: str) -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(receivers.http_endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        connection.request(method, path, body=body, headers={
            "Content-Type": content_type, "Authorization": f"Bearer {TOKEN}"})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_slow_calls_never_hold_exports_or_health(receivers) -> None:
    served, endpoint = receivers
    release = threading.Event()
    ask = json.dumps({"argv": ["report", "weekly"]}).encode()
    try:
        slow = [endpoint.pool.submit(release.wait, 60) for _ in range(endpoint.pool.limit)]
        status, headers, body = _send(served, "POST", PATH, ask, "application/json")
        assert status == 503 and headers.get("Retry-After") == "1", body
        assert "the most at once" in json.loads(body)["error"]
        # meanwhile the exports and the operator's pages are answered as ever
        export = raw_request(5).SerializeToString()
        assert _send(served, "POST", "/v1/traces", export, "application/x-protobuf")[0] == 200
        assert _send(served, "GET", "/healthz", None, "text/plain")[0] == 200
    finally:
        release.set()
    for future in slow:
        future.result(60)
    status, headers, body = _send(served, "POST", PATH, ask, "application/json")
    assert status == 200 and headers["Content-Type"] == ANSWER_TYPE
    assert headers["Transfer-Encoding"] == "chunked"
    code, out, _ = read_answer(body.splitlines())
    assert code == 0 and out.startswith(b"week,")


# ---- what one call may hold: rows read, rows answered, bytes answered ----------------------
@pytest.fixture(scope="module")
def sample_owner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseOwner]:
    """The bundled sample (1,800 runs) held by an owner, as serve holds its file."""
    owner = DatabaseOwner(ui.sample_copy(tmp_path_factory, "answer-bounds"))
    yield owner
    owner.close()


def _run(owner: DatabaseOwner, argv: list[str], **bounds: int) -> tuple[int, str, str]:
    result = ServedCommands(owner, group=cli, seconds=60, **bounds).run(argv)
    return result.status, result.stdout.decode(), result.stderr.decode()


@pytest.mark.slow
def test_a_report_built_whole_past_its_rows_is_refused_saying_how_to_narrow_it(
        sample_owner) -> None:
    status, out, err = _run(sample_owner, ["report", "runs", "--format", "table"],
                            answer_rows=1_000)
    assert (status, out) == (1, "")
    assert "1,800 rows" in err and "at most 1,000" in err
    assert "--limit" in err and "--since" in err
    # Narrowed as it says, it is answered.
    status, out, err = _run(sample_owner, ["report", "runs", "--format", "json",
                                           "--limit", "1000"], answer_rows=1_000)
    assert status == 0, err
    assert len(json.loads(out)) == 1_000


@pytest.mark.slow
@pytest.mark.parametrize("form", ["json", "csv"])
def test_a_csv_or_json_report_is_streamed_whatever_its_rows(sample_owner, form: str) -> None:
    """No row bound applies: the rows are written as the query hands them over, the same
    bytes as without any bound (and as on the file: tests/cli/test_cli_server.py)."""
    bounded = _run(sample_owner, ["report", "runs", "--format", form], answer_rows=100,
                   read_rows=100)
    assert bounded[0] == 0, bounded[2]
    assert bounded == _run(sample_owner, ["report", "runs", "--format", form])
    assert bounded[1].count("\n") > 1_800


@pytest.mark.slow
def test_a_command_reading_more_rows_than_the_bound_is_refused(sample_owner) -> None:
    status, out, err = _run(sample_owner, ["report", "runs", "--limit", "5"], read_rows=1_000)
    assert (status, out) == (1, "")
    assert "reads at most 1,000 rows" in err and "runs_report" in err and "--since" in err
    # The same query within the bound: every row, the same bytes as without a bound.
    assert _run(sample_owner, ["report", "runs", "--limit", "5"], read_rows=1_800) == \
        _run(sample_owner, ["report", "runs", "--limit", "5"])


@pytest.mark.slow
def test_the_refusal_reaches_the_client_over_http(sample_owner, tmp_path: Path) -> None:
    commands = ServedCommands(sample_owner, group=cli, seconds=60, answer_rows=100)
    receivers = Receivers(sample_owner, ReceiverConfig(
        http_port=0, grpc_port=0, token=TOKEN,
        routes=lambda parts: {PATH: CliEndpoint(commands, parts.token)}))
    receivers.start()
    try:
        ask = json.dumps({"argv": ["report", "runs", "--format", "table"]}).encode()
        status, _, body = _send(receivers, "POST", PATH, ask, "application/json")
    finally:
        receivers.stop(10)
    code, out, err = read_answer(body.splitlines())
    assert status == 200 and code == 1 and out == b""
    assert b"--limit" in err


@pytest.fixture(scope="module")
def large_owner(sample_owner: DatabaseOwner,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseOwner]:
    """The sample's runs copied under new ids up to 36,000: a JSON answer of about 20 MB,
    more than the socket buffers and the stream's window hold."""
    path = tmp_path_factory.mktemp("answer-large") / "large.duckdb"
    cursor = sample_owner.cursor()
    try:
        cursor.execute("CHECKPOINT")
    finally:
        cursor.close()
    shutil.copyfile(sample_owner.path, path)
    con = connect(path)
    try:
        con.execute("CREATE TEMP TABLE base_runs AS SELECT * FROM runs")
        for copy in range(1, 20):
            con.execute("INSERT INTO runs SELECT * REPLACE (md5(run_id || ?::VARCHAR) AS "
                        "run_id, md5(trace_id || ?::VARCHAR) AS trace_id) FROM base_runs",
                        [copy, copy])
    finally:
        con.close()
    owner = DatabaseOwner(path)
    yield owner
    owner.close()


@pytest.mark.slow
def test_a_client_that_leaves_stops_the_command(large_owner) -> None:
    """The answer is written only as fast as the client takes it: a client that reads a few
    bytes and leaves frees the call's thread at once (its next write stops the command),
    rather than after the minute a client may take nothing; more of them than the pool holds
    in a row are each answered."""
    endpoint = CliEndpoint(ServedCommands(large_owner, group=cli, seconds=60),
                           BearerToken(TOKEN))
    receivers = Receivers(large_owner, ReceiverConfig(http_port=0, grpc_port=0, token=TOKEN,
                                                      routes=lambda parts: {PATH: endpoint}))
    receivers.start()
    try:
        ask = json.dumps({"argv": ["report", "runs", "--format", "json"]}).encode()
        for _ in range(endpoint.pool.limit + 2):
            url = urlsplit(receivers.http_endpoint)
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
            connection.request("POST", PATH, body=ask, headers={
                "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
            response = connection.getresponse()
            assert response.status == 200
            response.read(16)
            connection.sock.close()  # gone, the answer half read
            connection.close()
        # every call that left gave its slot back: a whole answer still comes
        status, _, body = _send(receivers, "POST", PATH, ask, "application/json")
        code, out, _ = read_answer(body.splitlines())
        assert status == 200 and code == 0 and len(out) > 16 * 1024 * 1024
    finally:
        receivers.stop(10)


# json.dumps knows no Decimal: dollars go through it as marked text, then become the number of
# their digits that the JSON writer writes (queries/money.py dollar_text).
_DOLLARS = re.compile(r'"\$dollars:([0-9.]+)\$"')


def _dollars_marked(value: object) -> object:
    from decimal import Decimal

    from queries.money import dollar_text
    return f"$dollars:{dollar_text(value)}$" if isinstance(value, Decimal) else value


@pytest.mark.slow
def test_pieces_write_the_bytes_of_the_whole_frame(large_owner) -> None:
    """A report streamed in pieces is the report whole: the same CSV, and the JSON that
    json.dumps writes for the whole list (checked against it, not against json_chunks), for
    every report, the runs report in many pieces."""
    import datetime as dt

    from queries.render import cell, csv_chunks, json_chunks, to_csv_bytes
    from queries.reports import PIECE_VECTORS, REPORTS, report_pieces
    from queries.terminal import json_inert

    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    cursor = large_owner.cursor()
    try:
        for name, report in REPORTS.items():
            whole = report(cursor, now=now) if name == "weekly" else report(cursor)
            pieces = list(report_pieces(cursor, name, now=now))
            if name == "runs":
                piece_rows = PIECE_VECTORS * 2_048
                assert len(pieces) == -(-36_000 // piece_rows) > 1
                assert sum(map(len, pieces)) == len(whole) == 36_000
            columns = [str(c) for c in whole.columns]
            records = [{c: _dollars_marked(cell(v, c)) for v, c in zip(row, columns, strict=True)}
                       for row in whole.itertuples(index=False, name=None)]
            expected = _DOLLARS.sub(r"\1", json_inert(json.dumps(records, indent=2,
                                                                ensure_ascii=False))) + "\n"
            assert b"".join(json_chunks(pieces)).decode() == expected, name
            assert b"".join(csv_chunks(pieces)) == to_csv_bytes(whole), name
    finally:
        cursor.close()
