"""`budgetscope prices` while `budgetscope serve` holds the file (docs/metrics.md §8, §11.3): the
command is carried out by the server, through its single writer, over its authenticated
/prices endpoint; the runs it re-prices are re-measured before the answer.

In process (real receivers on 127.0.0.1, the real OTLP exporter, real HTTP) to read the runs at
the moment of the answer; and as real processes (`serve` and the CLI) for a user's path."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from budgetscope.server.prices_endpoint import PATH, PricesEndpoint
from store import DeclaredPrices
from tests.support.cost_rows import nano
from tests.support.serve import (
    ServedEndpoint,
    cli_as,
    serving_endpoint,
    start_serve,
    stop,
    stored,
)
from tests.support.trace_builder import TraceBuilder, open_db, store

TOKEN = "prices-token-0123456"
PICO = 10**12  # a rate of $1 per million tokens


def acme_spans() -> TraceBuilder:
    """One run with one call of acme-7b (no price anywhere): 1000 in, 100 out."""
    b = TraceBuilder()
    run = b.run(0, 2_000, None, gen__ai_agent_name="billing")
    b.span("acme", 0, 1_000, parent=run, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "acme-7b",
        "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100})
    return b


class Served(ServedEndpoint):
    path, token = PATH, TOKEN
    runs_sql = "SELECT cost_nano, cost_complete FROM runs"


def _serving(folder: Path) -> AbstractContextManager[Served]:
    return serving_endpoint(Served, folder, lambda owner, parts: PricesEndpoint(
        DeclaredPrices(owner, parts.writer), parts.token), acme_spans(), runs=1)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A server of its own, for a test that changes what it holds."""
    with _serving(tmp_path) as serving:
        yield serving


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the module's tests of requests it refuses, each of which checks that
    nothing was stored (a server of its own each cost 1.2 s, waiting for the derivation)."""
    with _serving(tmp_path_factory.mktemp("refusing")) as serving:
        yield serving


@pytest.mark.slow
def test_a_price_is_stored_by_the_server_and_its_runs_re_priced_before_the_answer(served):
    assert served.runs() == [(0, False)]
    status, answer = served.change(action="set", model="acme-7b", input_rate=PICO,
                                   output_rate=2 * PICO)
    assert status == 200, answer
    assert answer["changed"] and answer["derived"] and answer["runs"] == 1
    # at the answer: 1000 × $1 + 100 × $2 per million
    assert served.runs() == [(nano("0.0012"), True)]
    status, listed = served.request("GET")
    assert status == 200 and listed["unpriced"] == []
    assert [(o["model"], o["input_rate"]) for o in listed["overrides"]] == [("acme-7b", PICO)]
    assert listed["bundled"]["name"] == "genai-prices"

    status, answer = served.change(action="unset", model="acme-7b")
    assert status == 200 and answer["changed"] and answer["runs"] == 1
    assert served.runs() == [(0, False)]
    assert [u["model"] for u in served.request("GET")[1]["unpriced"]] == ["acme-7b"]


@pytest.mark.parametrize(("payload", "problem"), [
    ({"action": "set", "model": "m", "input_rate": -1, "output_rate": 0}, "is negative"),
    ({"action": "set", "model": "m", "input_rate": 1.5, "output_rate": 0}, "whole number"),
    ({"action": "set", "model": "m", "input_rate": 1}, "needs --input and --output"),
    ({"action": "set", "model": "", "input_rate": 1, "output_rate": 1}, "model is empty"),
    ({"action": "set", "model": "a*b", "input_rate": 1, "output_rate": 1}, "trailing *"),
    ({"action": "set", "model": "m", "input_rate": 1, "output_rate": 1, "from_ns": "x"},
     "not a time"),
    ({"action": "drop", "model": "m"}, "unknown action"),
    (["set"], "expected a JSON object"),
])
def test_the_server_refuses_bad_prices_naming_the_problem(refusing, payload, problem):
    status, answer = refusing.request("POST", json.dumps(payload).encode())
    assert status == 400 and problem in answer["error"], answer
    assert refusing.request("GET")[1]["overrides"] == []


def test_the_endpoint_needs_the_token_and_json(refusing):
    body = json.dumps({"action": "set", "model": "m", "input_rate": 0,
                       "output_rate": 0}).encode()
    assert refusing.request("POST", body, token=None)[0] == 401
    assert refusing.request("GET", token="wrong")[0] == 401
    status, answer = refusing.request("POST", body, content_type="text/plain")
    assert status == 415 and "application/json" in answer["error"]
    assert refusing.request("PUT")[0] == 405
    assert refusing.request("GET")[1]["overrides"] == []


def _cli(db: Path, *arguments: str, token: str | None = None) -> subprocess.CompletedProcess:
    return cli_as(db, "prices", *arguments, token=token)


@pytest.mark.slow
def test_the_cli_sends_prices_to_the_serve_holding_the_file(tmp_path: Path) -> None:
    db = tmp_path / "held.duckdb"
    con = open_db(tmp_path, db.name)
    try:
        store(con, acme_spans().finished())
    finally:
        con.close()
    process, announced = start_serve(db, "--no-ui", token=TOKEN)
    try:
        assert announced["prices"].endswith("/prices")
        checked = _cli(db, "check", token=TOKEN)
        assert checked.returncode == 0, checked.stderr
        assert "budgetscope prices set acme-7b --input X --output X" in checked.stdout
        done = _cli(db, "set", "acme-7b", "--input", "1", "--output", "2", token=TOKEN)
        assert done.returncode == 0, done.stderr
        assert "by the budgetscope serve holding the file; 1 run re-measured" in done.stdout
        listed = _cli(db, "list", token=TOKEN)
        assert listed.returncode == 0 and listed.stdout.startswith("acme-7b"), listed.stderr
        refused = _cli(db, "set", "acme-7b", "--input", "-2", "--output", "2", token=TOKEN)
        assert refused.returncode == 2 and "is negative" in refused.stderr
        no_token = _cli(db, "unset", "acme-7b")
        assert no_token.returncode == 1 and "bearer token" in no_token.stderr
    finally:
        code, _, err = stop(process)
    assert code == 0, err
    assert stored(db, "SELECT cost_nano FROM runs") == nano("0.0012")
