"""The cost reports, `check`'s cost thresholds and `run`'s cost block through the CLI
(CliRunner, real DuckDB files): CLI bytes are the dashboard's download bytes, dollars are
exact in every format, thresholds breach with exit 1, the cost block fits 80 columns, and span
text (a 10 KB model name with escapes, a formula) is inert wherever it lands. The figures are
tests/support/cost_fleet.py's, worked by hand there."""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from queries import reports
from queries.filters import Filters
from queries.render import to_csv_bytes
from tests.support.cost_fleet import build_cost_fleet
from tests.support.golden import check_golden
from tests.support.hostile_costs import FORMULA_MODEL, hostile_costs_db
from tests.support.terminal_capture import assert_inert, on_terminal
from tests.support.trace_builder import open_db

# Anything a terminal acts on: C0 but the line feed, DEL, C1, bidi overrides.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# check's window for the fleet: the 7 days before 2026-11-24 hold C1, C2 and C4, not C3.
UNTIL = "2026-11-24"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    folder = tmp_path_factory.mktemp("cost_cli")
    con = open_db(folder, "fleet.duckdb")
    try:
        ids = build_cost_fleet(con)
    finally:
        con.close()
    return str(folder / "fleet.duckdb"), ids


def invoke(db: str, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


# ---- the reports -------------------------------------------------------------------------

@pytest.mark.parametrize("arguments,report", [
    (("cost",), "cost"), (("cost-attribution",), "cost_attribution"),
    (("cost-attribution", "--dimension", "usd"), "cost_attribution"),
    (("cost-attribution", "--dimension", "tokens"), "token_attribution"),
    (("models",), "models"), (("weekly",), "weekly"), (("runs",), "runs")])
def test_cli_bytes_are_the_dashboard_download(fleet, arguments, report) -> None:
    db, _ = fleet
    for filters, options in ((Filters(), ()), (Filters(agent="shop"), ("--agent", "shop")),
                             (Filters.parse("2026-11-20", None), ("--since", "2026-11-20"))):
        result = CliRunner().invoke(cli, ["--db", db, "report", *arguments, *options])
        assert result.exit_code == 0, result.output
        con = open_db(Path(db).parent, Path(db).name)
        try:  # what the dashboard hands to st.download_button for reports.ALL[report]
            expected = to_csv_bytes(reports.ALL[report](con, filters))
        finally:
            con.close()
        assert result.stdout_bytes == expected, (arguments, options)


@pytest.mark.parametrize("arguments", [
    ("cost",), ("cost-attribution",), ("cost-attribution", "--dimension", "tokens"),
    ("models",), ("weekly",), ("runs",)], ids=lambda a: "-".join(a))
def test_cost_fleet_golden(fleet, arguments) -> None:
    """The hand-worked fleet's CSV, byte for byte (tests/golden/cost_fleet_*.csv). --until
    ends the range with the fleet's last week, so the filter cuts no week short."""
    db, _ = fleet
    result = CliRunner().invoke(cli, ["--db", db, "report", *arguments, "--until",
                                      "2026-11-30"])
    assert result.exit_code == 0, result.output
    check_golden(f"cost_fleet_{'_'.join(a.lstrip('-') for a in arguments)}.csv",
                 result.stdout_bytes)


def test_cost_csv_cells(fleet) -> None:
    db, ids = fleet
    rows = list(csv.reader(io.StringIO(invoke(db, "report", "cost"), newline="")))
    header = rows[0]
    c1 = dict(zip(header, next(row for row in rows if row[0] == ids["C1"]), strict=True))
    # dollars: up to 9 decimals, trailing zeros trimmed; fractions 6 decimals; steps #n key
    assert c1 == {
        "run_id": ids["C1"], "agent": "shop", "start": "2026-11-23T10:00:00.000Z",
        "tokens": "126200", "input_tokens": "125000", "cache_read_tokens": "1000",
        "cache_write_tokens": "0", "output_tokens": "1200", "reasoning_tokens": "100",
        "cost_usd": "0.51", "cost_complete": "true", "usd_budget": "0.5",
        "usd_budget_source": "span", "cost_utilisation": "1.020000", "usd_exhausted": "true",
        "cost_culprit": "#1 model:gpt-4o", "cost_culprit_share": "0.600000",
        "cost_crosser": "#4 model:gpt-4o-mini", "overrun_usd": "0.01",
        "unattributed_usd": "0", "token_budget": "100000", "token_budget_source": "span",
        "token_utilisation": "1.262000", "tokens_exhausted": "true",
        "token_culprit": "#1 model:gpt-4o", "token_culprit_share": "1.205000",
        "token_crosser": "#1 model:gpt-4o", "overrun_tokens": "26200", "unpriced_steps": "0",
        "unmetered_steps": "0", "reported_total_usd": ""}
    c2 = dict(zip(header, next(row for row in rows if row[0] == ids["C2"]), strict=True))
    assert (c2["cost_usd"], c2["cost_complete"], c2["cost_crosser"], c2["token_budget"]) == (
        "0.052", "false", "", "")


def test_json_writes_dollars_as_exact_numbers(fleet) -> None:
    db, ids = fleet
    text = invoke(db, "report", "cost", "--format", "json")
    rows = {row["run_id"]: row for row in json.loads(text, parse_float=Decimal)}
    assert rows[ids["C1"]]["cost_usd"] == Decimal("0.51")
    assert rows[ids["C2"]]["cost_usd"] == Decimal("0.052")
    assert rows[ids["C3"]]["reported_total_usd"] == Decimal("0.99")
    assert rows[ids["C4"]]["usd_budget"] is None
    assert '"cost_usd": 0.51,' in text and '"usd_budget": 0.5,' in text
    models = json.loads(invoke(db, "report", "models", "--format", "json"),
                        parse_float=Decimal)
    assert [(m["model"], m["cost_usd"]) for m in models][-2:] == [
        ("ft:gpt-4o-mini:acme:v1", Decimal("0.002")), ("acme-secret", None)]


def test_tables_for_people(fleet) -> None:
    db, _ = fleet
    # wide enough for every column (at 80 the table shows the first few and names the rest)
    table = invoke(db, "report", "cost", "--format", "table", "--width", "400")
    assert "$0.51" in table and "102.0%" in table and "#4 model:gpt-4o-mini" in table
    attribution = invoke(db, "report", "cost-attribution", "--format", "table")
    assert attribution.splitlines()[2].split() == ["model:claude", "75.0%", "1", "1", "2"]
    # §11.6: over the runs with a crosser, how often the culprit is that step
    assert attribution.endswith("\n3 dollar-exhausted runs; the culprit is the crosser in "
                                "0.0%, not the crosser in 100.0% (of the 2 with a crosser)\n")
    tokens = invoke(db, "report", "cost-attribution", "--dimension", "tokens", "--format",
                    "table")
    assert tokens.endswith("\n1 token-exhausted run; the culprit is the crosser in 100.0%, "
                           "not the crosser in 0.0% (of the 1 with a crosser)\n")
    shop = invoke(db, "report", "cost-attribution", "--agent", "shop", "--since", "2026-11-23",
                  "--until", "2026-11-23T10:30:00Z", "--format", "table")
    assert "1 dollar-exhausted run;" in shop
    none = invoke(db, "report", "cost-attribution", "--since", "2027-01-01", "--format",
                  "table")
    assert none.endswith("(no rows)\n\n0 dollar-exhausted runs; none has a crosser (a step "
                         "whose call reached the budget)\n")


def test_the_runs_table_shows_cost_before_the_less_read_columns(fleet) -> None:
    """`report runs --format table` takes its columns by priority while they fit: a run's cost
    and whether it is complete come before holder, unattributed and the rest."""
    db, ids = fleet
    table = invoke(db, "report", "runs", "--format", "table", "--width", "140")
    header, _, *rows = table.splitlines()
    assert "cost_usd" in header.split() and "cost_complete" in header.split()
    assert "holder" not in header.split()
    assert all(len(line) <= 140 for line in table.splitlines())
    assert rows[-1].startswith("(") and "holder" in rows[-1] and "cost_usd" not in rows[-1]
    by_run = {line.split()[0]: line.split() for line in rows if not line.startswith("(")}
    c1 = next(cells for start, cells in by_run.items() if ids["C1"].startswith(start))
    assert c1[-2:] == ["$0.51", "true"]


def test_an_incomplete_cost_reads_as_a_lower_bound_in_every_table(fleet) -> None:
    """docs/metrics.md §11.4: C2's cost is incomplete (acme-secret has no price, #3 sent no
    usage and may have been billed), so a person reads `≥ $0.052`, and its utilisation of the
    declared $0.20 `≥ 26.0%`; C1's complete $0.51 reads plain. The week W48 of shop holds C2:
    its $0.562 and its overrun (C1's $0.01) are lower bounds too; W47 of batch (C3, complete)
    is not. CSV and JSON keep the number and say so in cost_complete."""
    db, ids = fleet

    def row_of(table: str, start: str) -> str:
        return next(line for line in table.splitlines() if line.startswith(start))

    runs = invoke(db, "report", "runs", "--format", "table", "--width", "400")
    assert row_of(runs, ids["C2"][:8]).endswith("≥ $0.052  false")
    assert row_of(runs, ids["C1"][:8]).endswith("  $0.51  true")
    cost = invoke(db, "report", "cost", "--format", "table", "--width", "400")
    c2 = row_of(cost, ids["C2"])
    assert "≥ $0.052  false" in c2 and "≥ 26.0%" in c2
    assert "≥" not in row_of(cost, ids["C1"])
    weekly = invoke(db, "report", "weekly", "--format", "table", "--width", "400",
                    "--until", "2026-11-30")
    shop = row_of(weekly, "2026-W48  shop")
    assert "≥ $0.562" in shop and shop.endswith("≥ $0.01")
    assert "≥" not in row_of(weekly, "2026-W47  batch")
    listed = {row["run_id"]: row for row in csv.DictReader(io.StringIO(
        invoke(db, "report", "runs"), newline=""))}
    assert (listed[ids["C2"]]["cost_usd"], listed[ids["C2"]]["cost_complete"]) == (
        "0.052", "false")
    as_json = {row["run_id"]: row for row in json.loads(
        invoke(db, "report", "runs", "--format", "json"), parse_float=Decimal)}
    assert (as_json[ids["C2"]]["cost_usd"], as_json[ids["C2"]]["cost_complete"]) == (
        Decimal("0.052"), False)


def test_dimension_is_for_cost_attribution_only(fleet) -> None:
    db, _ = fleet
    wrong = invoke(db, "report", "cost", "--dimension", "tokens", code=2)
    assert "--dimension applies to the cost-attribution report only" in wrong
    bogus = invoke(db, "report", "cost-attribution", "--dimension", "time", code=2)
    assert "'time' is not one of 'usd', 'tokens'" in bogus
    assert "cost, cost-attribution, models" in invoke(db, "report", "nope", code=2)


# ---- check ---------------------------------------------------------------------------------

def check(db: str, *arguments: str, code: int) -> list[str]:
    return invoke(db, "check", "--until", UNTIL, *arguments, code=code).splitlines()


def verdicts(lines: list[str]) -> list[str]:
    """`check`'s lines without the command (and link) under each breach that lists its runs."""
    return [line for line in lines if not line.startswith(" " * 8)]


def test_check_cost_thresholds_breach(fleet) -> None:
    db, _ = fleet
    # the window's runs: C1 and C4 dollar-exhausted of the 3 budgeted in dollars (C4 by its
    # refusal); C1 token-exhausted of 1; C2's unpriced step; shop spent $0.562 of its weekly
    # $0.50 in 2026-W48
    lines = check(db, "--max-usd-exhaustion-rate", "0.5", "--max-token-exhaustion-rate",
                  "0.99", "--max-weekly-budget-utilisation", "1.1", "--max-unpriced-steps",
                  "0", code=1)
    assert lines[0] == ("window 2026-11-17T00:00:00Z to 2026-11-24T00:00:00Z (7d): 3 runs, "
                        "10 steps, 0 write steps")
    assert verdicts(lines[1:]) == [
        "BREACH  usd_exhaustion_rate 66.7% > max 50.0% (2 of 3 usd budgeted runs)",
        "BREACH  token_exhaustion_rate 100.0% > max 99.0% (1 of 1 token budgeted runs)",
        "BREACH  weekly_budget_utilisation 112.4% > max 110.0% (shop, 2026-W48)",
        "BREACH  unpriced_steps 1 > max 0",
        "4 of 4 thresholds breached"]


def test_each_cost_breach_leads_to_its_runs(fleet) -> None:
    """Under each cost breach, the command that lists its runs (`_RUNS_BEHIND`: without an
    entry, `check` failed with a KeyError, exit 1, which cron reads as a breach) lists exactly
    the runs behind it, and the Runs page's link reads without a problem as the same search."""
    from urllib.parse import parse_qsl, urlsplit

    from dashboard.run_search_params import from_params, to_params
    db, ids = fleet
    behind = {  # the window's runs (C1, C2, C4): C1 $0.51, C2 ≥ $0.052, C4 $0.02
        "usd_exhaustion_rate": ("--max-usd-exhaustion-rate", "0.5", ["C1", "C4"]),
        "token_exhaustion_rate": ("--max-token-exhaustion-rate", "0.99", ["C1"]),
        # shop's week 2026-W48 breached: its runs in that week (and the window), not C4
        "weekly_budget_utilisation": ("--max-weekly-budget-utilisation", "1.1",
                                      ["C1", "C2"]),
        "unpriced_steps": ("--max-unpriced-steps", "0", ["C2"]),
    }
    for signal, (option, limit, runs) in behind.items():
        lines = check(db, option, limit, "--dashboard-url", "http://dash.example:8501/",
                      code=1)
        assert lines[1].startswith(f"BREACH  {signal} "), lines
        command, link = lines[2].strip(), lines[3].strip()
        assert command.startswith(f"runs: budgetscope --db {db} report runs "), command
        words = command.removeprefix("runs: budgetscope ").split()
        listed = json.loads(invoke(db, *words[2:], "--format", "json"))
        assert [r["run_id"] for r in listed] == [ids[r] for r in runs], (signal, listed)
        assert link.startswith("open: http://dash.example:8501/runs?"), link
        params = dict(parse_qsl(urlsplit(link.removeprefix("open: ")).query))
        search, _, problems = from_params(params)
        assert problems == [], (signal, problems)
        assert to_params(search) == {k: v for k, v in params.items()
                                     if k not in ("range", "since", "until", "agent")}, signal


def test_a_weekly_budget_breach_lists_each_breaching_agents_week(fleet) -> None:
    """Over the 14 days before 2026-11-24, two agent-weeks spent more than half their weekly
    budget: shop's 2026-W48 ($0.562 of $0.50: 112.4%, the window's last day of it) and
    batch's 2026-W47 (C3's $0.76 of the default $1). Each gets a command listing its runs in
    that ISO week, the largest first: C1 and C2; C3. batch's W48 (C4, 2%) did not breach and
    is in neither, nor is any run of another agent or week. The commands are run as printed."""
    from urllib.parse import parse_qsl, urlsplit

    db, ids = fleet
    lines = check(db, "--window", "14d", "--max-weekly-budget-utilisation", "0.5",
                  "--dashboard-url", "http://dash.example:8501/", code=1)
    assert lines[1] == ("BREACH  weekly_budget_utilisation 112.4% > max 50.0% "
                        "(shop, 2026-W48)")
    commands = [line.strip().removeprefix("runs: ") for line in lines
                if line.strip().startswith("runs: ")]
    opened = [line.strip().removeprefix("open: ") for line in lines
              if line.strip().startswith("open: ")]
    assert commands == [
        f"budgetscope --db {db} report runs --sort cost_usd:desc --since 2026-11-23 "
        "--until 2026-11-24 --agent shop --format table",
        f"budgetscope --db {db} report runs --sort cost_usd:desc --since 2026-11-16 "
        "--until 2026-11-23 --agent batch --format table"]
    listed = []
    for command in commands:
        words = command.removeprefix("budgetscope ").split()
        rows = json.loads(invoke(db, *words[2:], "--format", "json"))
        listed.append([r["run_id"] for r in rows])
    assert listed == [[ids["C1"], ids["C2"]], [ids["C3"]]]
    assert [dict(parse_qsl(urlsplit(link).query)) for link in opened] == [
        {"range": "custom", "since": "2026-11-23", "until": "2026-11-24", "agent": "shop",
         "sort": "cost_usd", "order": "desc"},
        {"range": "custom", "since": "2026-11-16", "until": "2026-11-23", "agent": "batch",
         "sort": "cost_usd", "order": "desc"}]
    as_json = json.loads(invoke(db, "check", "--until", UNTIL, "--window", "14d",
                                "--max-weekly-budget-utilisation", "0.5", "--format", "json",
                                code=1))
    (verdict,) = as_json["checks"]
    assert [lead["command"] for lead in verdict["runs_commands"]] == commands
    assert verdict["runs_command"] == commands[0]


def test_check_cost_thresholds_hold(fleet) -> None:
    db, _ = fleet
    lines = check(db, "--max-usd-exhaustion-rate", "0.7", "--max-weekly-budget-utilisation",
                  "1.5", "--max-unpriced-steps", "1", code=0)
    assert lines[1:] == [
        "ok      usd_exhaustion_rate 66.7% <= max 70.0% (2 of 3 usd budgeted runs)",
        "ok      weekly_budget_utilisation 112.4% <= max 150.0% (shop, 2026-W48)",
        "ok      unpriced_steps 1 <= max 1",
        "all 3 thresholds hold"]
    # one agent: batch's week holds $0.02 of its $1 (the default's weekly budget)
    lines = check(db, "--agent", "batch", "--max-weekly-budget-utilisation", "0.01", code=1)
    assert lines[2].lstrip().startswith("runs: budgetscope --db ")  # the window's runs
    assert lines[1] == ("BREACH  weekly_budget_utilisation 2.0% > max 1.0% (batch, "
                        "2026-W48)")


def test_check_cost_thresholds_no_data_and_json(fleet) -> None:
    db, _ = fleet
    lines = invoke(db, "check", "--until", "2020-01-01", "--max-usd-exhaustion-rate", "0",
                   "--max-weekly-budget-utilisation", "0").splitlines()
    assert lines[1:] == [
        "NO DATA usd_exhaustion_rate: max 0.0% (0 of 0 usd budgeted runs)",
        "NO DATA weekly_budget_utilisation: max 0.0%",
        "all 2 thresholds hold"]
    document = json.loads(invoke(db, "check", "--until", UNTIL, "--format", "json",
                                 "--max-unpriced-steps", "0", code=1))
    assert [{k: c[k] for k in ("signal", "bound", "limit", "value", "state")}
            for c in document["checks"]] == [{"signal": "unpriced_steps", "bound": "max",
                                              "limit": 0.0, "value": 1, "state": "breach"}]
    assert {k: document["signals"][k] for k in (
        "usd_budgeted_runs", "usd_exhausted_runs", "tokens", "cost_nano",
        "weekly_budget_agent", "weekly_budget_week")} == {
        "usd_budgeted_runs": 3, "usd_exhausted_runs": 2, "tokens": 130_550,
        "cost_nano": 582_000_000, "weekly_budget_agent": "shop",
        "weekly_budget_week": "2026-W48"}


def test_check_cost_usage_errors_exit_2(fleet) -> None:
    db, _ = fleet
    assert "is not in the range" in invoke(db, "check", "--max-usd-exhaustion-rate", "1.5",
                                           code=2)
    assert "is not in the range" in invoke(db, "check", "--max-weekly-budget-utilisation",
                                           "-1", code=2)
    assert "is not a valid integer" in invoke(db, "check", "--max-unpriced-steps", "0.5",
                                              code=2)


# ---- run: the cost block ------------------------------------------------------------------

def block(text: str) -> list[str]:
    """The cost block of `run`'s output: from "Spent" to the blank line after it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Spent "))
    end = lines.index("", start)
    return lines[start:end]


def test_run_cost_block_culprit_is_not_the_crosser(fleet) -> None:
    db, ids = fleet
    text = invoke(db, "run", ids["C1"], "--width", "80")
    assert all(len(line) <= 80 for line in text.splitlines())
    assert block(text) == [
        "Spent          $0.51 of a $0.50 dollar budget (102.0%), over by $0.01:",
        "               dollar-exhausted.",
        "Cost culprit   #1 model:gpt-4o: 60.0% of the dollar budget ($0.30).",
        "Crosser        #4 model:gpt-4o-mini reached the dollar budget: $0.42 spent",
        "               before it, $0.51 after. It is not the cost culprit: the step that",
        "               crossed the line is not the one that spent the most.",
        "Tokens         126,200 of a 100,000 token budget (126.2%), over by 26,200,",
        "               token-exhausted: in 125,000 / cache read 1,000 / cache write 0 /",
        "               out 1,200 / reasoning 100.",
        "Token culprit  #1 model:gpt-4o: 120.5% of the token budget (120,500 tokens).",
        "Token crosser  #1 model:gpt-4o reached the token budget: 0 tokens spent before",
        "               it, 120,500 tokens after. It is also the token culprit: the same",
        "               step.",
        "Cost by step   3 steps with usage",
        "     step                tokens   cost  from",
        "  #1 model:gpt-4o       120,500  $0.30  reported",
        "  #3 model:gpt-4o-mini    3,400  $0.12  reported",
        "  #4 model:gpt-4o-mini    2,300  $0.09  reported"]


def test_run_cost_block_lower_bound_names_the_unpriced_models(fleet) -> None:
    db, ids = fleet
    text = invoke(db, "run", ids["C2"], "--width", "80")
    assert all(len(line) <= 80 for line in text.splitlines())
    assert block(text) == [
        "Spent          ≥ $0.052 of its declared $0.20 dollar budget (≥ 26.0%). A lower",
        "               bound: no price for acme-secret (budgetscope prices set MODEL",
        "               --input X --output X prices it); 1 model step sent no usage and",
        "               may have been billed.",
        "Spent most     #1 model:gpt-4o: 25.0% of the dollar budget ($0.05).",
        "Tokens         3,800: in 3,000 / cache read 0 / cache write 0 / out 800 /",
        "               reasoning 0.",
        "Cost by step   4 steps with usage",
        "     step                          tokens      cost  from",
        "  #1 model:gpt-4o                   1,200     $0.05  reported",
        "  #2 model:acme-secret              1,100   unknown  no price",
        "  #3 model:gpt-4o                          no usage",
        "  #4 model:ft:gpt-4o-mini:acme:v1   1,500    $0.002  your price"]


def test_run_cost_block_without_a_dollar_budget(fleet) -> None:
    db, ids = fleet
    text = invoke(db, "run", ids["C4"], "--width", "80")
    assert block(text)[:4] == [
        "Spent          $0.02; no dollar budget is known, but the run is",
        "               dollar-exhausted: a step was refused for its dollar budget",
        "               (budget.refused_by usd).",
        "Tokens         550: in 500 / cache read 0 / cache write 0 / out 50 / reasoning"]
    # the refusal was for dollars: the time story does not call the run exhausted
    assert "refused for lack of tokens or dollars, not time." in " ".join(text.split())
    # parallel calls of one key: the crosser is another call of the culprit's step key, and
    # the framework's own total is shown beside the sum
    c3 = " ".join(" ".join(block(invoke(db, "run", ids["C3"], "--width", "80"))).split())
    assert ("Crosser #2 model:claude reached the dollar budget: $0.40 spent before it, $0.75 "
            "after. It is another call of the same step key, not the cost culprit itself.") in c3
    assert "Reported $0.99 by the framework's own total" in c3
    assert "Unattributed $0.01 spent by calls under no step." in c3


def test_a_run_without_usage_or_cost_budgets_has_no_cost_block(tmp_path: Path) -> None:
    from tests.support.trace_builder import TraceBuilder, store

    b = TraceBuilder(seed=3)
    run = b.run(0, 2_000, 10_000)
    b.step(run, "tool", "fetch", 0, 1_000)
    con = open_db(tmp_path)
    store(con, b.finished())
    con.close()
    text = invoke(str(tmp_path / "test.duckdb"), "run", b.trace_id(run))
    assert "Spent " not in text and "Cost by step" not in text


# ---- span text, inert wherever it lands --------------------------------------------------

@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return hostile_costs_db(tmp_path_factory.mktemp("hostile_costs"))


@pytest.mark.parametrize("report", ["cost", "models", "cost-attribution"])
def test_csv_cells_never_start_a_formula(hostile, report: str) -> None:
    db, _ = hostile
    rows = list(csv.reader(io.StringIO(invoke(db, "report", report), newline="")))
    for value in (value for row in rows[1:] for value in row):
        assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), (report, value)
    if report == "models":
        # §11.3 splits a provider/model name at its first "/" (and lower-cases the
        # provider): the formula's start is the provider's cell, neutralised like any other
        assert "'" + FORMULA_MODEL.split("/", 1)[0].lower() in [row[1] for row in rows]
        assert len(rows) == 3  # the 10 KB name, its carriage return quoted: one row


def test_run_with_a_10_kb_model_name_fits_80_columns(hostile) -> None:
    db, run_id = hostile
    text = invoke(db, "run", run_id, "--width", "80")
    assert not CONTROL.search(text.replace("\n", "")), repr(text[:400])
    assert all(len(line) <= 80 for line in text.splitlines())
    lines = block(text)
    said = " ".join(" ".join(lines).split())
    assert said.startswith("Spent ≥ $0.02 of a $0.01 dollar budget (≥ 200.0%), over by "
                           "≥ $0.01: dollar-exhausted. A lower bound: no price for ")
    # the unpriced model (what follows the first "/" of its name: §11.3 splits a
    # provider/model name) is named inert and shortened, in the block and its step table:
    # the block stays a screenful, whatever the name's length
    assert "no price for /evillink xmmm" in said and "m… (budgetscope prices set" in said
    assert "Crosser #2 model:'" not in said  # a terminal is no spreadsheet: shown as sent
    assert 'Crosser #2 model:=HYPERLINK("http://evil","x") reached the dollar budget' in said
    assert len(lines) < 20 and sum(len(line) for line in lines) < 1_600


@pytest.mark.slow
@pytest.mark.parametrize("arguments", [
    ("report", "cost", "--format", "table"), ("report", "models", "--format", "table"),
    ("report", "models"), ("report", "cost-attribution", "--format", "table")],
    ids=lambda a: " ".join(a))
def test_on_a_terminal_nothing_acts(hostile, arguments) -> None:
    db, _ = hostile
    status, text = on_terminal(db, *arguments)
    assert status == 0 and text.strip(), text
    assert_inert(text)


@pytest.mark.slow
def test_the_run_cost_block_on_a_terminal(hostile) -> None:
    db, run_id = hostile
    status, text = on_terminal(db, "run", run_id)
    assert status == 0
    assert_inert(text)
    assert "Crosser" in text
