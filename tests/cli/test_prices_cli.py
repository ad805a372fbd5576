"""`budgetscope prices` on a file nobody serves (docs/metrics.md §8, §11.3, §11.8): set, unset,
list and check; a price set beats the bundled table (exact before prefix, the longer prefix
first, a provider before any, the latest --from at or before the span's start); a change
re-prices the affected runs at once, past ones included; bad input is a usage error (exit 2).

1000 input and 100 output tokens of gpt-4o cost $0.0035 from the bundled table ($2.50 / $10
per million tokens): 1000 × 2.5 + 100 × 10 = 3500 millionths of a dollar.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from tests.support.cost_rows import metered, nano
from tests.support.trace_builder import TraceBuilder, open_db, store

DAY_MS = 86_400_000


def _call(b: TraceBuilder, parent, name: str, start_ms: float, model: str,
          provider: str | None = "openai") -> None:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                  "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100}
    if provider:
        attributes["gen_ai.provider.name"] = provider
    b.span(name, start_ms, start_ms + 1_000, parent=parent, attributes=attributes)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Four runs: gpt-4o on Monday 2026-11-23 and on Tuesday; acme-7b (unpriced), and
    ft:gpt-4o-mini:acme:x (a fine-tune the bundled table does not know)."""
    b = TraceBuilder()
    monday = b.run(0, 2_000, None, gen__ai_agent_name="support")
    _call(b, monday, "gpt monday", 0, "gpt-4o")
    tuesday = b.run(DAY_MS, DAY_MS + 2_000, None, gen__ai_agent_name="support")
    _call(b, tuesday, "gpt tuesday", DAY_MS, "gpt-4o")
    acme = b.run(0, 2_000, None, gen__ai_agent_name="billing")
    _call(b, acme, "acme", 0, "acme-7b", provider=None)
    _call(b, acme, "acme again", 1_000, "acme-7b", provider=None)
    tuned = b.run(0, 2_000, None, gen__ai_agent_name="billing")
    _call(b, tuned, "tuned", 0, "ft:gpt-4o-mini:acme:x")
    con = open_db(tmp_path)
    try:
        store(con, b.finished())
    finally:
        con.close()
    return tmp_path / "test.duckdb"


def invoke(db: Path, *arguments: str):
    return CliRunner().invoke(cli, ["--db", str(db), "prices", *arguments])


def cost(db: Path, name: str) -> tuple[int | None, str]:
    con = open_db(db.parent, db.name)
    try:
        row = metered(con, name)
        return row["cost_nano"], row["cost_source"]
    finally:
        con.close()


def run_costs(db: Path) -> dict[str, tuple]:
    con = open_db(db.parent, db.name)
    try:
        return {agent: (cost, complete) for agent, cost, complete in con.execute(
            "SELECT agent, sum(cost_nano), bool_and(cost_complete) FROM runs GROUP BY agent"
        ).fetchall()}
    finally:
        con.close()


def test_check_lists_every_unpriced_model_with_its_steps_and_the_command(db: Path) -> None:
    result = invoke(db, "check")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("acme-7b") and "2 steps" in lines[0]
    assert lines[0].endswith("budgetscope prices set acme-7b --input X --output X")
    assert "budgetscope prices set ft:gpt-4o-mini:acme:x --provider openai --input X " \
           "--output X" in lines[1]
    listed = json.loads(invoke(db, "check", "--format", "json").output)
    assert [(row["model"], row["provider"], row["steps"], row["spans"]) for row in listed] == [
        ("acme-7b", None, 2, 2), ("ft:gpt-4o-mini:acme:x", "openai", 1, 1)]


def test_set_prices_the_model_and_re_prices_its_past_runs(db: Path) -> None:
    """acme-7b at $1 in, $2 out: 1000 × 1 + 100 × 2 = $0.0012 a call, $0.0024 the run; the
    billing runs' cost is then complete but for the fine-tune."""
    assert run_costs(db)["billing"] == (0, False)
    result = invoke(db, "set", "acme-7b", "--input", "1", "--output", "2")
    assert result.exit_code == 0, result.output
    assert "price of 'acme-7b' set to input $1, output $2 per million tokens; 1 run " \
           "re-measured" in result.output
    assert cost(db, "acme") == (nano("0.0012"), "override")
    assert run_costs(db)["billing"] == (nano("0.0024"), False)
    assert invoke(db, "set", "acme-7b", "--input", "1", "--output", "2").output.endswith(
        "is already so; nothing changed\n")
    # a prefix prices the fine-tune: 1000 × 0.3 + 100 × 1.2 = $0.00042
    assert invoke(db, "set", "ft:gpt-4o-mini:acme:*", "--input", "0.30", "--output",
                  "1.20").exit_code == 0
    assert cost(db, "tuned") == (nano("0.00042"), "override")
    assert run_costs(db)["billing"] == (nano("0.00282"), True)
    assert "every metered span has a price" in invoke(db, "check").output

    result = invoke(db, "unset", "acme-7b")
    assert result.exit_code == 0 and "removed; 1 run re-measured" in result.output
    assert cost(db, "acme") == (None, "unpriced")
    assert "no price of 'acme-7b' was set; nothing changed" in invoke(db, "unset",
                                                                      "acme-7b").output


def test_a_price_set_beats_the_bundled_table_by_its_precedence(db: Path) -> None:
    """gpt-4o's bundled $0.0035 (1000 in, 100 out). A prefix `gpt-4*` at $1/$1 ($0.0011) beats
    the bundled table; the longer `gpt-4o*` at $2/$2 ($0.0022) beats it; the exact name at
    $5/$20 ($0.007) beats both; an exact name for another provider (azure) changes nothing
    here; the same name for openai at $3/$3 ($0.0033) beats the one for any provider."""
    assert cost(db, "gpt monday") == (nano("0.0035"), "bundled")
    steps = [("gpt-4*", [], "1", "1", "0.0011"), ("gpt-4o*", [], "2", "2", "0.0022"),
             ("gpt-4o", [], "5", "20", "0.007"), ("gpt-4o", ["--provider", "azure"], "9", "9",
                                                   "0.007"),
             ("gpt-4o", ["--provider", "OpenAI"], "3", "3", "0.0033")]
    for model, extra, price_in, price_out, expected in steps:
        result = invoke(db, "set", model, *extra, "--input", price_in, "--output", price_out)
        assert result.exit_code == 0, result.output
        assert cost(db, "gpt monday") == (nano(expected), "override"), model


def test_from_dates_a_price_so_that_it_does_not_rewrite_the_past(db: Path) -> None:
    """Set from Tuesday 2026-11-24: Monday's call keeps its bundled price, Tuesday's pays the
    new one ($5 / $20: $0.007); a dated entry beats an undated one from its date on; unset
    with --from removes only the dated entry."""
    result = invoke(db, "set", "gpt-4o", "--input", "5", "--output", "20", "--from",
                    "2026-11-24")
    assert result.exit_code == 0, result.output
    assert cost(db, "gpt monday") == (nano("0.0035"), "bundled")
    assert cost(db, "gpt tuesday") == (nano("0.007"), "override")
    assert invoke(db, "set", "gpt-4o", "--input", "1", "--output", "1").exit_code == 0
    assert cost(db, "gpt monday") == (nano("0.0011"), "override")
    assert cost(db, "gpt tuesday") == (nano("0.007"), "override")
    assert invoke(db, "unset", "gpt-4o", "--from", "2026-11-24").exit_code == 0
    assert cost(db, "gpt tuesday") == (nano("0.0011"), "override")
    listed = json.loads(invoke(db, "list", "--format", "json").output)
    assert [(row["model"], row["from_ns"]) for row in listed["overrides"]] == [("gpt-4o", None)]
    assert listed["bundled"]["name"] == "genai-prices" and listed["bundled"]["models"] > 2000


def test_list_shows_the_prices_set_then_the_bundled_table(db: Path) -> None:
    invoke(db, "set", "acme-7b", "--input", "0", "--output", "0.000000000001",
           "--cache-read", "0.5", "--provider", "vllm", "--from", "2026-01-01")
    result = invoke(db, "list")
    assert result.exit_code == 0, result.output
    first, last = result.output.splitlines()[0], result.output.splitlines()[-1]
    assert first.split()[:4] == ["acme-7b", "vllm", "from", "2026-01-01"]
    assert "input $0, output $0.000000000001, cache read $0.5 per million tokens" in first
    assert last.startswith("bundled: genai-prices 0.2.5 (") and last.endswith(" models)")


def test_a_pattern_no_span_names_yet_is_accepted_and_said(db: Path) -> None:
    result = invoke(db, "set", "llama-3.3-70b-local", "--input", "0", "--output", "0")
    assert result.exit_code == 0, result.output
    assert "0 runs re-measured" in result.output
    assert "no stored span of model 'llama-3.3-70b-local' yet; the price applies to those " \
           "that arrive" in result.output


@pytest.mark.parametrize(("arguments", "problem"), [
    (["set", "m", "--input", "-1", "--output", "2"], "input price '-1' is negative"),
    (["set", "m", "--input", "1", "--output", "-0.5"], "output price '-0.5' is negative"),
    (["set", "m", "--input", "cheap", "--output", "2"], "is not a number"),
    (["set", "m", "--input", "1e7", "--output", "2"], "more than a million"),
    (["set", "m", "--input", "0.0000000000001", "--output", "2"], "more than 12 decimals"),
    (["set", "m", "--input", "nan", "--output", "2"], "not a finite number"),
    (["set", "m", "--output", "2"], "Missing option '--input'"),
    (["set", "m*x", "--input", "1", "--output", "2"], "only a trailing * matches"),
    (["set", "", "--input", "1", "--output", "2"], "model is empty"),
    (["set", "m\x1b[31m", "--input", "1", "--output", "2"], "control characters"),
    (["set", "m", "--input", "1", "--output", "2", "--from", "24/11/2026"], "not a date"),
    (["set", "m", "--input", "1", "--output", "2", "--from", "2026-02-30"], "not a date"),
    (["unset", "m", "--from", "tomorrow"], "not a date"),
])
def test_bad_input_is_a_usage_error_naming_the_problem(db: Path, arguments, problem) -> None:
    result = invoke(db, *arguments)
    assert result.exit_code == 2, result.output
    assert problem in result.output
    assert json.loads(invoke(db, "list", "--format", "json").output)["overrides"] == []


def test_without_a_database_it_says_so(tmp_path: Path) -> None:
    result = invoke(tmp_path / "missing.duckdb", "set", "m", "--input", "1", "--output", "1")
    assert result.exit_code == 1 and "no database at" in result.output
    assert not (tmp_path / "missing.duckdb").exists()


def test_a_span_of_a_dated_price_is_priced_at_its_start_not_its_end(tmp_path: Path) -> None:
    """A call that starts at 23:59:59 on the 23rd and ends on the 24th pays the price in force
    when it started: the undated $2 per million input tokens, not the $4 from the 24th;
    1,000,000 input tokens cost $2."""
    before_midnight_ms = 14 * 3_600_000 - 1_000  # T0 is 2026-11-23T10:00Z
    b = TraceBuilder(seed=9)
    run = b.run(before_midnight_ms, before_midnight_ms + 2_000, None)
    b.span("straddles", before_midnight_ms, before_midnight_ms + 2_000, parent=run, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "acme-7b",
        "gen_ai.usage.input_tokens": 1_000_000})
    con = open_db(tmp_path)
    try:
        store(con, b.finished())
    finally:
        con.close()
    db = tmp_path / "test.duckdb"
    assert invoke(db, "set", "acme-7b", "--input", "2", "--output", "0").exit_code == 0
    assert invoke(db, "set", "acme-7b", "--input", "4", "--output", "0", "--from",
                  "2026-11-24").exit_code == 0
    assert cost(db, "straddles") == (nano("2"), "override")
