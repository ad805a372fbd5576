"""Token and dollar budgets declared per agent and by default (docs/metrics.md §10, §11.5):
`budgets set AGENT [DURATION] --tokens N --usd X --usd-per-week X`, each dimension sourced and
overridden independently (a run's own budget.total_usd beats a declared --usd, as its
budget.total_ms beats a declared duration), and a change re-measures every affected run in that
dimension at once, past ones included.

Three runs, each with one call that reported its cost: support ($0.40, 3,000 tokens), support
with its own budget.total_usd of $1 ($0.40, 3,000 tokens), billing ($0.10, 1,000 tokens).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from tests.support.cost_rows import nano
from tests.support.trace_builder import TraceBuilder, open_db, store


def _call(b: TraceBuilder, run, dollars: str, tokens: int) -> None:
    b.span(f"call {b.trace_id(run)}", 0, 1_000, parent=run, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": tokens, "budget.cost_usd": dollars})


# The runs every test starts from, stored and derived once a module; each test changes a copy
# of the file (`db`), rather than building it again (3-6 s a build on 2 loaded cores).
@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tokens-dollars")
    b = TraceBuilder()
    plain = b.run(0, 2_000, None, gen__ai_agent_name="support")
    _call(b, plain, "0.40", 3_000)
    own = b.run(0, 2_000, None, gen__ai_agent_name="support", budget_total__usd=1)
    _call(b, own, "0.40", 3_000)
    billing = b.run(0, 2_000, None, gen__ai_agent_name="billing")
    _call(b, billing, "0.10", 1_000)
    con = open_db(folder)
    try:
        store(con, b.finished())
    finally:
        con.close()
    return folder / "test.duckdb"


@pytest.fixture
def db(built: Path, tmp_path: Path) -> Path:
    path = tmp_path / built.name
    shutil.copyfile(built, path)
    return path


def invoke(db: Path, *arguments: str):
    return CliRunner().invoke(cli, ["--db", str(db), "budgets", *arguments])


def runs(db: Path) -> list[tuple]:
    """(agent, budget_ms, usd_budget_nano, usd_budget_source, usd_exhausted, token_budget,
    token_budget_source, tokens_exhausted), the run with its own dollar budget last."""
    con = open_db(db.parent, db.name)
    try:
        return con.execute(
            "SELECT agent, budget_ms, usd_budget_nano, usd_budget_source, usd_exhausted, "
            "token_budget, token_budget_source, tokens_exhausted FROM runs "
            "ORDER BY agent, usd_budget_source = 'span'").fetchall()
    finally:
        con.close()


def test_each_dimension_is_declared_sourced_and_removed_on_its_own(db: Path) -> None:
    result = invoke(db, "set", "support", "--usd", "0.25", "--tokens", "2.5k")
    assert result.exit_code == 0, result.output
    assert "budget of agent 'support' set to 2500 tokens, $0.25 a run; 2 runs re-derived" in \
        result.output
    # $0.40 >= $0.25 and 3000 >= 2500; the run with its own $1 keeps it (and is not exhausted)
    assert runs(db) == [
        ("billing", None, None, None, None, None, None, None),
        ("support", None, nano("0.25"), "declared", True, 2_500, "declared", True),
        ("support", None, nano("1"), "span", False, 2_500, "declared", True)]
    # a duration added later leaves the other dimensions as declared
    assert invoke(db, "set", "support", "10s").exit_code == 0
    assert [row[1:4] for row in runs(db)[1:]] == [(10_000, nano("0.25"), "declared"),
                                                  (10_000, nano("1"), "span")]
    # the default's dollars reach billing, which declares none; support keeps its own
    assert invoke(db, "set", "--default", "--usd", "0.05", "--usd-per-week", "20").exit_code == 0
    assert runs(db)[0][2:5] == (nano("0.05"), "declared", True)
    assert runs(db)[1][2] == nano("0.25")
    # removing support's tokens only: its dollars and duration stay
    result = invoke(db, "unset", "support", "--tokens")
    assert result.exit_code == 0 and "budget of agent 'support': tokens removed" in result.output
    assert [row[1:3] + row[5:8] for row in runs(db)[1:]] == [
        (10_000, nano("0.25"), None, None, None), (10_000, nano("1"), None, None, None)]
    # removing support's dollars: the default's $0.05 applies to its run without its own
    assert invoke(db, "unset", "support", "--usd").exit_code == 0
    assert runs(db)[1][2:4] == (nano("0.05"), "declared")
    listed = json.loads(invoke(db, "list", "--format", "json").output)
    assert [(d["scope"], d["duration_ms"], d["tokens"], d["usd_nano"], d["usd_per_week_nano"])
            for d in listed] == [("default", None, None, nano("0.05"), nano("20")),
                                 ("agent", 10_000, None, None, None)]
    # no flag removes everything declared for the agent
    assert invoke(db, "unset", "support").exit_code == 0
    assert [d["scope"] for d in json.loads(invoke(db, "list", "--format", "json").output)] == [
        "default"]


def test_a_weekly_budget_alone_re_measures_no_run(db: Path) -> None:
    result = invoke(db, "set", "billing", "--usd-per-week", "20.5")
    assert result.exit_code == 0, result.output
    assert "set to $20.5 a week; 0 runs re-derived" in result.output
    assert "no stored run" not in result.output  # a weekly budget concerns weeks, not runs
    table = invoke(db, "list").output
    assert "billing" in table and "$20.5 a week" in table


@pytest.mark.parametrize(("arguments", "problem"), [
    (["set", "support", "--usd", "-1"], "is negative"),
    (["set", "support", "--usd", "0.0000000001"], "more than 9 decimal places"),
    (["set", "support", "--usd", "ten"], "is not an amount of dollars"),
    (["set", "support", "--tokens", "-5"], "is not a token count"),
    (["set", "support", "--tokens", "1.2345k"], "not a whole number of tokens"),
    (["set", "support", "--tokens", "2 thousand"], "is not a token count"),
    (["set", "support", "--tokens", "2T"], "is not a token count"),
    (["set", "support", "--usd-per-week", "-3"], "is negative"),
    (["set", "support"], "set takes AGENT DURATION"),
    (["set", "--default"], "set --default takes a DURATION"),
])
def test_bad_input_is_refused_with_exit_2_naming_the_problem(db: Path, arguments, problem
                                                             ) -> None:
    result = invoke(db, *arguments)
    assert result.exit_code == 2, result.output
    assert problem in result.output
    assert "nothing declared" in invoke(db, "list").output


def test_zero_is_a_budget(db: Path) -> None:
    """$0 and 0 tokens are budgets (no money, no tokens): every run that spent is over."""
    assert invoke(db, "set", "billing", "--usd", "0", "--tokens", "0").exit_code == 0
    assert runs(db)[0][2:8] == (0, "declared", True, 0, "declared", True)
