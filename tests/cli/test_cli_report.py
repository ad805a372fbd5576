"""`budgetscope report` and `budgetscope run` through click, on real DuckDB files.

Golden files: tests/golden/fleet_<report>.csv (the hand-worked fleet of tests/support/fleet.py) and
tests/golden/sample_<report>.csv (the bundled sample traces). Regenerate them with
BUDGETSCOPE_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from queries import reports
from queries.render import to_csv_bytes
from tests.support.fleet import build_fleet
from tests.support.golden import check_golden
from tests.support.trace_builder import open_db

NAMES = list(reports.REPORTS)


@pytest.fixture(scope="module")
def fleet_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "fleet.duckdb"
    con = open_db(path.parent, path.name)
    ids = build_fleet(con)
    con.close()
    return str(path), ids


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("name", NAMES)
def test_fleet_report_golden(fleet_db, name):
    db, _ = fleet_db
    result = invoke("--db", db, "report", name)
    assert result.exit_code == 0, result.output
    check_golden(f"fleet_{name}.csv", result.stdout_bytes)


def test_dashboard_csv_is_byte_identical_to_cli(fleet_db, tmp_path):
    db, _ = fleet_db
    out = tmp_path / "weekly.csv"
    result = invoke("--db", db, "report", "weekly", "--out", str(out))
    assert result.exit_code == 0, result.output
    con = open_db(Path(db).parent, Path(db).name)
    try:
        assert out.read_bytes() == to_csv_bytes(reports.weekly(con))
    finally:
        con.close()


def test_formats_and_filters(fleet_db):
    db, _ = fleet_db
    result = invoke("--db", db, "report", "attribution", "--agent", "alpha", "--format", "json")
    assert result.exit_code == 0, result.output
    assert '"step_key": "model:gpt"' in result.output
    assert '"budget_share": 0.566667' in result.output
    table = invoke("--db", db, "report", "attribution", "--format", "table")
    assert table.exit_code == 0, table.output
    assert "culprit is the holder in 0.0%" in table.output
    since = invoke("--db", db, "report", "runs", "--since", "2026-11-23", "--until",
                   "2026-11-23T11:00:00Z")
    assert since.exit_code == 0, since.output
    assert len(since.output.splitlines()) == 2  # header + A1


@pytest.mark.parametrize("args,message", [
    (["report", "nope"], "unknown report 'nope'"),
    (["report", "runs", "--since", "last week"], "--since: 'last week' is not an ISO date"),
    (["report", "runs", "--until", "2026-11-31"], "--until: '2026-11-31'"),
    (["run", "0" * 32], "no run '00000000000000000000000000000000'"),
    (["report", "runs", "--format", "xml"], "Invalid value for '--format'"),
])
def test_bad_input_is_one_line_and_non_zero(fleet_db, args, message):
    db, _ = fleet_db
    result = invoke("--db", db, *args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_missing_database(tmp_path):
    result = invoke("--db", str(tmp_path / "none.duckdb"), "report", "runs")
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: no database at")
    assert not (tmp_path / "none.duckdb").exists()


def test_run_view(fleet_db):
    db, ids = fleet_db
    result = invoke("--db", db, "run", ids["A1"], "--width", "200")
    assert result.exit_code == 0, result.output
    text = result.output
    assert f"run {ids['A1']}  agent alpha  started 2026-11-23 10:00:00 UTC" in text
    # Durations and percentages as the dashboard writes them (one formatting module)
    assert "exhausted true  budget 10.0 s  elapsed 12.0 s  utilisation 120.0%" in text
    assert ("What happened  The deadline fired at +10.0 s; the run's last span ended at +12.0 s, "
            "2.0 s past it. Exhausted: it ran to its deadline.") in text
    # Culprit and holder by their numbers, and what the one is to the other, in words
    assert ("Who spent      Culprit #1 tool:fetch: 80.0% of the budget (8.0 s). Holder "
            "#2 model:gpt (running when the deadline fired): another step than the culprit."
            ) in text
    assert "| = deadline at +10.0 s" in text
    assert "Failures       no failed step" in text
    rows = [line for line in text.splitlines() if " #1 " in line or " #2 " in line]
    assert rows[-2].startswith("C  #1 tool:fetch") and rows[-1].startswith("H  #2 model:gpt")
    no_budget = invoke("--db", db, "run", ids["N1"], "--width", "200")
    assert no_budget.exit_code == 0, no_budget.output
    assert "No budget is known for this run (no budget.total_ms" in no_budget.output
    assert "Failures       1 client give-up (#1)" in no_budget.output
    wrong = invoke("--db", db, "run", f"{ids['A1']}/0000000000000000")
    assert wrong.exit_code == 1 and f"runs of that trace: {ids['A1']}" in wrong.output


def test_a_healthy_run_has_a_largest_consumer(fleet_db):
    """A2 ended before its deadline: nobody to blame, and no warning about its holder."""
    db, ids = fleet_db
    text = invoke("--db", db, "run", ids["A2"], "--width", "200").output
    assert "Largest consumer #2 model:gpt: 30.0% of the budget (3.0 s). It is also the holder" \
        in text
    assert "culprit" not in text.lower()
    assert "LH #2 model:gpt" in text  # the largest consumer's and the holder's row


def widest(text: str) -> int:
    """The widest line, but for a line that is one word too long for any (a path in a
    command, continued with ` \\`; an address): never cut, it is copied whole."""
    return max([len(line) for line in text.splitlines()
                if " " in line.strip().removesuffix(" \\")] or [0])


@pytest.mark.parametrize("width", [80, 100, 160])
def test_run_fits_the_width(fleet_db, width, monkeypatch):
    """Every line fits: given --width, else the terminal's width (COLUMNS), at least 80."""
    db, ids = fleet_db
    for run in ("A1", "B1", "N1"):
        text = invoke("--db", db, "run", ids[run], "--width", str(width)).output
        assert widest(text) <= width, text
    monkeypatch.setenv("COLUMNS", str(width))
    text = invoke("--db", db, "run", ids["A1"]).output
    widest_line = widest(text)
    assert widest_line <= width and (width == 160 or widest_line > width - 10), text
    monkeypatch.setenv("COLUMNS", "40")  # a narrow terminal still gets 80: rows need room
    assert max(len(line) for line in invoke("--db", db, "run", ids["A1"]).output
               .splitlines()) > 40
    narrow = invoke("--db", db, "run", ids["A1"], "--width", "60")
    assert narrow.exit_code == 2 and "60 is not in the range 80<=x<=400" in narrow.output


def test_run_takes_a_unique_prefix_and_lists_an_ambiguous_one(fleet_db):
    db, ids = fleet_db
    prefix = ids["A1"][:6]
    others = [run_id for run_id in ids.values() if run_id.startswith(prefix)]
    assert others == [ids["A1"]]  # the fleet's ids differ in their first characters
    found = invoke("--db", db, "run", prefix.upper())
    assert found.exit_code == 0, found.output
    assert found.output.startswith(f"run {ids['A1']}")
    # every fleet id holds an "e" or a "8" early on: find a prefix two of them share
    first = sorted(ids.values())
    shared = next(a[:1] for a, b in zip(first, first[1:], strict=False) if a[0] == b[0])
    ambiguous = invoke("--db", db, "run", shared)
    assert ambiguous.exit_code == 1
    assert f"{shared!r} is the start of more than one run id; give more of it:" \
        in ambiguous.output
    listed = ambiguous.output.split("give more of it:", 1)[1]
    assert {r for r in ids.values() if r.startswith(shared)} == {
        r.strip(" .\n") for r in listed.split(",")}


def test_run_view_writes(tmp_path):
    from tests.support.trace_builder import TraceBuilder, store
    b = TraceBuilder()
    run = b.run(0, 5_000, 4_000)
    b.step(run, "tool", "pay", 0, 4_000, **{"budget.side_effect": "write",
                                            "budget.idempotency_key": "pay-123",
                                            "budget.outcome": "client_timeout"})
    b.step(run, "tool", "mail", 4_000, 4_500, **{"budget.side_effect": "write",
                                                 "budget.idempotency_key": "mail-9",
                                                 "budget.effect_status": "possible"})
    b.step(run, "reconcile", "mail", 4_500, 4_600, **{"budget.idempotency_key": "mail-9",
                                                      "budget.reconcile.result": "landed"})
    con = open_db(tmp_path)
    store(con, b.finished())
    con.close()
    result = invoke("--db", str(tmp_path / "test.duckdb"), "run", b.trace_id(run), "--width",
                    "200")
    assert result.exit_code == 0, result.output
    wide = result.output
    assert "Writes         2 write steps: 2 uncertain, 1 reconciled, 1 orphan" in wide
    # one line a write, orphans first, each with its key
    assert ("\n               #1 tool:pay may have taken effect and nobody read it back "
            "(idempotency key pay-123): read it back before retrying.\n"
            "               #2 tool:mail was uncertain and read back: landed (idempotency key "
            "mail-9).\n") in wide
    assert ("Next step      Read back key pay-123 of #1 tool:pay before retrying: the write "
            "may have taken effect.") in wide


# The session's sample (tests/conftest.py), copied for this module: loaded by the loader and
# derivation `budgetscope ingest` calls (tests/cli/test_cli_server.py ingests it through the command
# itself), once a session rather than once more here.
@pytest.mark.parametrize("name", NAMES)
def test_sample_report_golden(sample, name):
    result = invoke("--db", sample, "report", name)
    assert result.exit_code == 0, result.output
    check_golden(f"sample_{name}.csv", result.stdout_bytes)


def test_a_mistyped_report_name_is_a_usage_error(fleet_db):
    """Regression: a typo'd report name exited 1 while other usage errors exit 2."""
    db, _ = fleet_db
    result = invoke("--db", db, "report", "runz")
    assert result.exit_code == 2, result.output
    assert "unknown report 'runz'" in result.output


def test_an_unknown_agent_is_named_with_the_known_ones(fleet_db):
    """`report --agent nosuch` printed only a header and exited 0: a usage error (exit 2)
    naming the agents there are, in every command that takes --agent."""
    db, _ = fleet_db
    for command in (["report", "weekly"], ["check", "--max-exhaustion-rate", "0.5"],
                    ["simulate"]):
        result = invoke("--db", db, *command, "--agent", "nosuch")
        assert result.exit_code == 2, (command, result.output)
        assert ("--agent 'nosuch': no such agent in this database; known agents: alpha, "
                "beta-svc") in result.output, command
    assert invoke("--db", db, "report", "weekly", "--agent", "alpha").exit_code == 0


@pytest.mark.parametrize("command", [["report", "weekly"], ["run", "0" * 32], ["check"]])
def test_the_database_option_after_the_command_says_where_it_goes(fleet_db, command):
    db, _ = fleet_db
    result = invoke(*command, "--db", db)
    assert result.exit_code == 2
    assert (f"--db goes before the command: budgetscope --db {db} {' '.join(command)}"
            in result.output)


def test_a_trace_file_given_as_the_database_says_to_ingest_it(tmp_path):
    from budgetscope.config import SAMPLE_TRACES

    copy = tmp_path / "traces.jsonl.gz"
    copy.write_bytes(SAMPLE_TRACES.read_bytes()[:4096])
    before = copy.read_bytes()
    for command in (["report", "runs"], ["run", "0" * 32], ["ingest", str(copy)],
                    ["budgets", "list"], ["retain", "--days", "1"]):
        result = invoke("--db", str(copy), *command)
        assert result.exit_code == 1, (command, result.output)
        assert (f"{copy} is a trace file, not a database: load it with `budgetscope --db "
                f"budgetscope.duckdb ingest {copy}`") in result.output, command
    assert copy.read_bytes() == before  # never opened as a database


def test_no_database_names_the_demos_file_when_it_is_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("report", "runs")
    assert result.exit_code == 1
    assert "try `budgetscope demo` (it writes budgetscope-demo.duckdb)" in result.output
    (tmp_path / "budgetscope-demo.duckdb").write_bytes(b"")
    result = invoke("report", "runs")
    assert ("no database at budgetscope.duckdb. The demo's database is here: give it before "
            "the command, `budgetscope --db budgetscope-demo.duckdb …`") in result.output


@pytest.mark.parametrize("command", [["budgets", "set", "billing", "45s"],
                                     ["budgets", "set", "--default", "1m"],
                                     ["budgets", "cap", "tool:fetch", "9s"],
                                     ["retain", "--days", "30"]])
def test_writers_refuse_a_missing_database_instead_of_creating_one(tmp_path, command):
    """`budgets set` on a path with no database made an empty budgetscope.duckdb, after which
    `check` said every threshold held: refused, as `report` refuses."""
    db = tmp_path / "budgetscope.duckdb"
    result = invoke("--db", str(db), *command)
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: no database at {db}")
    assert not db.exists()


def test_runs_report_narrows_sorts_and_limits(fleet_db):
    """`report runs` has --outcome, --exhausted, --culprit, --sort, --limit, and a
    table lists the newest runs first."""
    import json
    db, ids = fleet_db

    def runs(*args: str) -> list[dict]:
        result = invoke("--db", db, "report", "runs", "--format", "json", *args)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    every = runs()
    assert [r["start"] for r in every] == sorted(r["start"] for r in every)
    exhausted = runs("--exhausted")
    assert exhausted and all(r["exhausted"] is True for r in exhausted)
    assert {r["run_id"] for r in runs("--not-exhausted")} == {
        r["run_id"] for r in every if r["exhausted"] is False}
    assert [r["run_id"] for r in runs("--outcome", "exhausted")] == [
        r["run_id"] for r in every if r["outcome"] == "exhausted"]
    assert len(runs("--outcome", "none")) == sum(r["outcome"] is None for r in every)
    assert {r["culprit"] for r in runs("--culprit", "tool:fetch")} == {"tool:fetch"}
    by_use = runs("--sort", "utilisation:desc", "--limit", "2")
    assert len(by_use) == 2
    assert [r["utilisation"] for r in by_use] == sorted(
        (r["utilisation"] for r in every if r["utilisation"] is not None), reverse=True)[:2]
    table = invoke("--db", db, "report", "runs", "--format", "table")
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()[2:]
    # up to the note naming the columns that did not fit 80 characters
    rows = lines[:next(i for i, line in enumerate(lines) if line.startswith("("))]
    assert rows and all(len(line) <= 80 for line in table.output.splitlines())
    # each run by the shortest start of its id that no other run shares
    starts = [next(r["start"] for r in every if r["run_id"].startswith(line.split()[0]))
              for line in rows]
    assert starts == sorted(starts, reverse=True)
    wrong = invoke("--db", db, "report", "weekly", "--culprit", "tool:fetch")
    assert wrong.exit_code == 2 and "apply to the runs report only" in wrong.output
    bad_sort = invoke("--db", db, "report", "runs", "--sort", "colour")
    assert bad_sort.exit_code == 2 and "cannot sort by 'colour'" in bad_sort.output


def test_tables_read_as_the_dashboard_does(fleet_db):
    """Regression: six-decimal fractions and raw milliseconds in `--format table`."""
    db, _ = fleet_db
    table = invoke("--db", db, "report", "utilisation", "--format", "table").output
    assert "116.0%" in table and "1.160000" not in table
    runs = invoke("--db", db, "report", "runs", "--format", "table", "--width", "300").output
    assert "10.0 s" in runs and "10000.000" not in runs
    assert "–" in runs  # N1 has no budget: one mark for no value, never a blank
    csv = invoke("--db", db, "report", "utilisation").output
    assert "1.160000" in csv  # CSV keeps raw fractions (docs/metrics.md §7)
