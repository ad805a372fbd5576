"""Declared budgets while `budgetscope serve` holds the file (docs/metrics.md §8,
docs/guide.md#declaring-budgets): the command is carried out by the server, through its single
writer, over its authenticated /budgets endpoint; the affected runs are re-derived before the
answer.

In process (real receivers on 127.0.0.1, the real OTLP exporter, real HTTP) to read the runs
table at the moment of the answer; and as real processes (`serve` and the CLI) for the path a
user takes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from budgetscope.server.budgets_endpoint import PATH, BudgetsEndpoint
from store import DeclaredBudgets
from tests.support.serve import (
    ServedEndpoint,
    cli_as,
    serving_endpoint,
    start_serve,
    stop,
    stored,
)
from tests.support.trace_builder import TraceBuilder, open_db, store

TOKEN = "budget-token-0123456"


def billing_spans() -> TraceBuilder:
    """billing: one run without a budget (9 s, fetch 6 s); one with its own 20 s."""
    b = TraceBuilder()
    run = b.run(0, 9_000, None, gen__ai_agent_name="billing")
    b.step(run, "tool", "fetch", 1_000, 7_000)
    own = b.run(0, 9_000, 20_000, gen__ai_agent_name="billing")
    b.step(own, "tool", "fetch", 1_000, 7_000)
    return b


class Served(ServedEndpoint):
    path, token = PATH, TOKEN
    runs_sql = ("SELECT budget_ms, budget_source, utilisation FROM runs "
                "ORDER BY budget_ms NULLS FIRST")


def _serving(folder: Path) -> AbstractContextManager[Served]:
    return serving_endpoint(Served, folder, lambda owner, parts: BudgetsEndpoint(
        DeclaredBudgets(owner, parts.writer), parts.token), billing_spans(), runs=2)


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
def test_a_change_is_stored_by_the_server_and_its_runs_re_derived_before_the_answer(served):
    status, answer = served.change(action="set", target="billing", duration_ms=8_000)
    assert status == 200, answer
    assert answer["changed"] and answer["derived"] and answer["runs"] == 1
    # at the answer: B = 8000 declared, utilisation 9000 / 8000; the span's own 20 s stays
    assert served.runs() == [(8_000, "declared", 1.125), (20_000, "span", 0.45)]

    status, answer = served.change(action="set", target="billing", duration_ms=18_000)
    assert status == 200 and answer["runs"] == 1
    assert served.runs() == [(18_000, "declared", 0.5), (20_000, "span", 0.45)]

    status, listed = served.request("GET")
    assert status == 200
    assert [(d["scope"], d["target"], d["duration_ms"]) for d in listed["declarations"]] == [
        ("agent", "billing", 18_000)]

    status, answer = served.change(action="unset", target="billing")
    assert status == 200 and answer["changed"]
    assert served.runs()[0][:2] == (None, None)


@pytest.mark.parametrize(("payload", "problem"), [
    ({"action": "set", "target": "billing", "duration_ms": 0}, "is zero"),
    ({"action": "set", "target": "billing", "duration_ms": -5}, "is negative"),
    ({"action": "set", "target": "billing", "duration_ms": "5s"}, "whole number"),
    ({"action": "set", "target": "billing", "duration_ms": 1.5}, "whole number"),
    ({"action": "set", "target": "", "duration_ms": 5}, "agent name is empty"),
    ({"action": "cap", "target": "fetch", "duration_ms": 5}, "not kind:name"),
    ({"action": "cap", "target": "tools:fetch", "duration_ms": 5}, "not a step kind"),
    ({"action": "drop", "target": "billing"}, "unknown action"),
    (["set"], "expected a JSON object"),
])
def test_the_server_refuses_bad_changes_naming_the_problem(refusing, payload, problem):
    status, answer = refusing.request("POST", json.dumps(payload).encode())
    assert status == 400 and problem in answer["error"]
    assert refusing.request("GET")[1]["declarations"] == []


def test_the_endpoint_needs_the_token_and_json(refusing):
    body = json.dumps({"action": "set", "target": "billing", "duration_ms": 5}).encode()
    assert refusing.request("POST", body, token=None)[0] == 401
    assert refusing.request("POST", body, token="wrong")[0] == 401
    assert refusing.request("GET", token=None)[0] == 401
    # a form post from another origin's page cannot carry application/json without a preflight
    status, answer = refusing.request("POST", body, content_type="text/plain")
    assert status == 415 and "application/json" in answer["error"]
    assert refusing.request("POST", b"{not json")[0] == 400
    assert refusing.request("DELETE")[0] == 405
    assert refusing.request("GET")[1]["declarations"] == []
    # the OTLP endpoint still works beside it
    assert refusing.runs()[1][1] == "span"


def _cli(db: Path, *arguments: str, token: str | None = None) -> subprocess.CompletedProcess:
    return cli_as(db, "budgets", *arguments, token=token)


@pytest.mark.slow
def test_the_cli_sends_the_command_to_the_serve_holding_the_file(tmp_path: Path) -> None:
    db = tmp_path / "held.duckdb"
    con = open_db(tmp_path, db.name)
    try:
        store(con, billing_spans().finished())
    finally:
        con.close()
    process, announced = start_serve(db, "--no-ui", token=TOKEN)
    try:
        assert announced["budgets"].endswith("/budgets")
        done = _cli(db, "set", "billing", "8s", token=TOKEN)
        assert done.returncode == 0, done.stderr
        assert "by the budgetscope serve holding the file; 1 run re-derived" in done.stdout
        assert _cli(db, "cap", "tool:fetch", "3s", token=TOKEN).returncode == 0
        listed = _cli(db, "list", "--format", "json", token=TOKEN)
        assert listed.returncode == 0, listed.stderr
        assert [(d["target"], d["duration_ms"]) for d in json.loads(listed.stdout)] == [
            ("billing", 8_000), ("tool:fetch", 3_000)]
        refused = _cli(db, "set", "billing", "0s", token=TOKEN)
        assert refused.returncode == 2 and "is zero" in refused.stderr
        no_token = _cli(db, "set", "billing", "9s")
        assert no_token.returncode == 1 and "bearer token" in no_token.stderr
    finally:
        code, _, err = stop(process)
    assert code == 0, err
    assert stored(db, "SELECT count(*) FROM runs WHERE budget_ms = 8000 AND "
                      "budget_source = 'declared'") == 1
    # fetch [1000, 7000) under cap 3 s in both runs: 6000 / 3000
    assert stored(db, "SELECT count(*) FROM steps WHERE utilisation = 2.0") == 2
