"""Finding runs by tokens and dollars (queries/run_search.py): `report runs --usd-exhausted`,
`--tokens-exhausted`, `--cost-incomplete`, `--cost-from/--cost-below` and the sorts by cost and
tokens list exactly the runs the cost report says, on the bundled sample (docs/metrics.md §11.4,
§11.5); the Runs page takes the same search from its address
(tests/dashboard/test_dashboard_cost.py)."""

from __future__ import annotations

import json
from decimal import Decimal

from click.testing import CliRunner

from budgetscope.cli import cli
from queries import reports
from queries.filters import Filters
from store import connect
from tests.support import ui

RANGE = ["--since", ui.SINCE, "--until", ui.UNTIL]


def listed(db: str, *options: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["--db", db, "report", "runs", *RANGE, *options,
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_runs_by_dollars_and_tokens_are_the_cost_reports(sample: str) -> None:
    con = connect(sample, read_only=True)
    try:
        cost = reports.cost(con, Filters.parse(ui.SINCE, ui.UNTIL))
    finally:
        con.close()
    usd = cost[cost["usd_exhausted"].fillna(False).astype(bool)]
    got = listed(sample, "--usd-exhausted", "--sort", "cost_usd:desc")
    assert [r["run_id"] for r in got] == list(
        usd.assign(c=usd["cost_usd"].map(float)).sort_values(
            ["c", "run_id"], ascending=[False, True])["run_id"])
    within = cost[cost["usd_exhausted"].notna() & ~cost["usd_exhausted"].fillna(False)]
    assert {r["run_id"] for r in listed(sample, "--not-usd-exhausted")} == set(within["run_id"])
    tokens = cost[cost["tokens_exhausted"].fillna(False).astype(bool)]
    assert {r["run_id"] for r in listed(sample, "--tokens-exhausted")} == set(tokens["run_id"])
    assert len(tokens) > 0
    lower = cost[~cost["cost_complete"].astype(bool)]
    assert {r["run_id"] for r in listed(sample, "--cost-incomplete")} == set(lower["run_id"])
    between = cost[cost["cost_usd"].map(lambda c: Decimal("0.1") <= c < Decimal("0.3"))]
    assert {r["run_id"] for r in listed(sample, "--cost-from", "0.1", "--cost-below",
                                        "0.3")} == set(between["run_id"])
    most = listed(sample, "--sort", "tokens:desc", "--limit", "3")
    assert [r["tokens"] for r in most] == sorted(cost["tokens"], reverse=True)[:3]


def test_bad_amounts_and_other_reports_are_usage_errors(sample: str) -> None:
    for options, said in ((["--cost-from", "-1"], "is not an amount of dollars"),
                          (["--cost-below", "x"], "is not an amount of dollars")):
        result = CliRunner().invoke(cli, ["--db", sample, "report", "runs", *options])
        assert result.exit_code == 2 and said in result.output, result.output
    result = CliRunner().invoke(cli, ["--db", sample, "report", "weekly", "--usd-exhausted"])
    assert result.exit_code == 2 and "runs report only" in result.output
