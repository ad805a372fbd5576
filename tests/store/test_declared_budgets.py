"""Declared budgets and step caps (docs/guide.md#declaring-budgets): a run without budget.total_ms
is measured against its agent's declared budget, else the declared default; a run's own budget wins;
a change re-measures past runs; declared caps give steps an allocation for step utilisation.

Times are ms after T0 (see trace_builder); each number is worked out by hand in a comment.
"""

from __future__ import annotations

import pytest

from store import (
    Change,
    DeclarationError,
    apply,
    checked_step_key,
    declarations,
    parse_duration_ms,
)
from store.testing import SCHEMA_VERSION, PendingDerivations, refresh_touched
from tests.support.trace_builder import MS, T0_NS, TraceBuilder, open_db, run_row, step_rows, store


@pytest.fixture
def con(tmp_path):
    connection = open_db(tmp_path)
    yield connection
    connection.close()


def declare(con, change: Change) -> int:
    """Apply a change and derive what it marked, as `budgetscope budgets` does on a file."""
    applied = apply(con, change)
    PendingDerivations(refresh_touched).run(con)
    return applied.runs


def _two_agents(con):
    """billing: a run without a budget, and one with its own 20 s; support: one without."""
    b = TraceBuilder()
    billing = b.run(0, 9_000, None, gen__ai_agent_name="billing")
    b.step(billing, "tool", "fetch", 1_000, 7_000)  # 6000 ms alone
    own = b.run(0, 9_000, 20_000, gen__ai_agent_name="billing")
    b.step(own, "tool", "fetch2", 1_000, 7_000)
    support = b.run(0, 4_000, None, gen__ai_agent_name="support")
    b.step(support, "model", "gpt", 0, 4_000)
    store(con, b.finished())
    return b.trace_id(billing), b.trace_id(own), b.trace_id(support)


def test_a_run_without_budget_total_ms_is_measured_against_its_agent_s_declaration(con):
    billing, own, support = _two_agents(con)
    assert run_row(con, billing)["budget_ms"] is None
    assert run_row(con, billing)["budget_source"] is None
    assert run_row(con, own)["budget_source"] == "span"

    assert declare(con, Change("set", "billing", 8_000)) == 1  # not the run with its own
    r = run_row(con, billing)
    # B = 8000 (declared), d = s + B = 8000 < run end 9000: e = 8000.
    assert (r["budget_ms"], r["budget_source"]) == (8_000, "declared")
    assert r["deadline_ns"] - r["start_ns"] == 8_000 * 10**6
    assert r["utilisation"] == pytest.approx(9_000 / 8_000)
    # the run ran past d: exhausted, overrun 9000 - 8000 = 1000.
    assert r["exhausted"] is True and r["overrun_ms"] == pytest.approx(1_000)
    # fetch [1000, 7000) inside [0, 8000): 6000 consumed, share 6000 / 8000; 2000 unattributed.
    assert r["culprit_key"] == "tool:fetch"
    assert r["culprit_share"] == pytest.approx(0.75)
    assert r["unattributed_ms"] == pytest.approx(2_000)
    assert step_rows(con, billing)["tool fetch"]["consumption_ms"] == pytest.approx(6_000)
    # the span's own budget wins; the other agent has none declared
    mine = run_row(con, own)
    assert (mine["budget_ms"], mine["budget_source"]) == (20_000, "span")
    assert run_row(con, support)["budget_source"] is None


@pytest.mark.slow
def test_the_default_covers_agents_without_a_declaration_and_changes_move_past_runs(con):
    billing, own, support = _two_agents(con)
    declare(con, Change("set", "billing", 8_000))
    # the default reaches support (no declaration), not billing (its own) nor the span budget
    assert declare(con, Change("set_default", None, 5_000)) == 1
    r = run_row(con, support)
    # B = 5000, run [0, 4000]: utilisation 0.8, not exhausted, gpt consumed 4000 = 0.8 of B.
    assert (r["budget_ms"], r["budget_source"]) == (5_000, "declared")
    assert r["utilisation"] == pytest.approx(0.8) and r["exhausted"] is False
    assert r["culprit_share"] == pytest.approx(0.8)
    assert run_row(con, billing)["budget_ms"] == 8_000

    # change billing's: its past run is re-measured at once
    assert declare(con, Change("set", "billing", 12_000)) == 1
    r = run_row(con, billing)
    # B = 12000 > run end 9000: e = 9000; utilisation 0.75, not exhausted, share 6000/12000.
    assert r["budget_ms"] == 12_000 and r["exhausted"] is False
    assert r["utilisation"] == pytest.approx(0.75)
    assert r["culprit_share"] == pytest.approx(0.5)
    assert r["overrun_ms"] == pytest.approx(0)

    # unset billing's: the default takes over; unset the default: unknown again
    declare(con, Change("unset", "billing"))
    assert run_row(con, billing)["budget_ms"] == 5_000
    declare(con, Change("unset_default"))
    for run_id in (billing, support):
        r = run_row(con, run_id)
        assert r["budget_ms"] is None and r["budget_source"] is None
        assert r["exhausted"] is None and r["culprit_share"] is None
    assert run_row(con, own)["budget_ms"] == 20_000
    assert declarations(con) == []


def test_a_declared_deadline_respects_budget_deadline_unix_ms(con):
    b = TraceBuilder()
    run = b.run(0, 9_000, None, gen__ai_agent_name="billing",
                budget_deadline__unix__ms=T0_NS // MS + 3_000)
    store(con, b.finished())
    declare(con, Change("set", "billing", 8_000))
    r = run_row(con, b.trace_id(run))
    # d = budget.deadline_unix_ms (3000 after s), not s + B
    assert r["budget_ms"] == 8_000
    assert r["deadline_ns"] - r["start_ns"] == 3_000 * 10**6
    assert r["overrun_ms"] == pytest.approx(6_000)


def test_a_repeated_declaration_changes_nothing_and_marks_nothing(con):
    _two_agents(con)
    declare(con, Change("set", "billing", 8_000))
    applied = apply(con, Change("set", "billing", 8_000))
    assert (applied.changed, applied.runs) == (False, 0)
    assert PendingDerivations.count(con) == 0


@pytest.mark.slow
def test_declared_caps_give_steps_an_allocation_for_step_utilisation(con):
    b = TraceBuilder()
    run = b.run(0, 9_000, 10_000)
    b.step(run, "tool", "fetch", 1_000, 4_000)   # 3000 ms
    b.step(run, "tool", "late", 7_000, 9_000)    # 2000 ms
    b.step(run, "tool", "own", 1_000, 2_000, **{"budget.allocated_ms": 4_000})
    b.step(run, "tool", "late2", 7_500, 8_000)   # 500 ms
    store(con, b.finished())
    rid = b.trace_id(run)
    assert step_rows(con, rid)["tool fetch"]["utilisation"] is None

    declare(con, Change("cap", "tool:fetch", 6_000))
    declare(con, Change("cap", "tool:late", 5_000))
    declare(con, Change("cap", "tool:own", 1_000))
    declare(con, Change("cap", "tool:late2", 2_000))
    declare(con, Change("cap", "tool:not_seen_yet", 2_000))  # allowed
    steps = step_rows(con, rid)
    # fetch: min(6000, B - (1000 - 0)) = min(6000, 9000) = 6000; 3000 / 6000
    assert steps["tool fetch"]["allocated_ms"] == 6_000
    assert steps["tool fetch"]["utilisation"] == pytest.approx(0.5)
    # late: min(5000, 10000 - 7000) = 3000; 2000 / 3000
    assert steps["tool late"]["allocated_ms"] == 3_000
    assert steps["tool late"]["utilisation"] == pytest.approx(2 / 3)
    # late2: min(2000, 10000 - 7500) = 2000; 500 / 2000
    assert steps["tool late2"]["utilisation"] == pytest.approx(0.25)
    # a step's own budget.allocated_ms wins: 1000 / 4000
    assert steps["tool own"]["allocated_ms"] == 4_000
    assert steps["tool own"]["utilisation"] == pytest.approx(0.25)

    declare(con, Change("uncap", "tool:fetch"))
    assert step_rows(con, rid)["tool fetch"]["utilisation"] is None
    keys = [(d.what, d.target, d.duration_ms) for d in declarations(con)]
    assert ("cap", "tool:late", 5_000) in keys and ("cap", "tool:fetch", 6_000) not in keys


def test_a_cap_follows_a_declared_budget(con):
    b = TraceBuilder()
    run = b.run(0, 9_000, None, gen__ai_agent_name="billing")
    b.step(run, "tool", "late", 7_000, 9_000)
    store(con, b.finished())
    declare(con, Change("cap", "tool:late", 5_000))
    rid = b.trace_id(run)
    # unknown budget: the cap alone is the allocation (2000 / 5000)
    assert step_rows(con, rid)["tool late"]["utilisation"] == pytest.approx(0.4)
    declare(con, Change("set", "billing", 8_000))
    # min(5000, 8000 - 7000) = 1000: 2000 / 1000
    late = step_rows(con, rid)["tool late"]
    assert late["allocated_ms"] == 1_000 and late["utilisation"] == pytest.approx(2.0)


@pytest.mark.parametrize(("text", "problem"), [
    ("0s", "zero"), ("0", "no unit"), ("-5s", "negative"), ("90", "no unit"),
    ("5 parsecs", "unknown unit"), ("abc", "not a duration"), ("0.5ms", "whole number"),
    ("", "not a duration"), ("400d", "366 days"),
])
def test_bad_durations_are_refused_naming_the_problem(text, problem):
    with pytest.raises(DeclarationError, match=problem):
        parse_duration_ms(text, "budget")


def test_durations_with_units():
    assert [parse_duration_ms(t) for t in ("90s", "2500ms", "1.5m", "2h", "1d", " 3 s ")] == [
        90_000, 2_500, 90_000, 7_200_000, 86_400_000, 3_000]


@pytest.mark.parametrize(("key", "problem"), [
    ("fetch_report", "not kind:name"), ("tools:fetch", "not a step kind"),
    ("tool:", "no name"), ("tool:  ", "no name"), (":fetch", "not a step kind"),
    ("tool:a\nb", "control characters"),
])
def test_malformed_step_keys_are_refused_naming_the_problem(key, problem):
    with pytest.raises(DeclarationError, match=problem):
        checked_step_key(key)


def test_step_keys_of_every_kind_and_names_with_colons():
    for kind in ("model", "tool", "subagent", "backoff", "queue", "reconcile", "other"):
        assert checked_step_key(f"{kind}:x") == f"{kind}:x"
    assert checked_step_key("model:openai:gpt-4o") == "model:openai:gpt-4o"


def test_a_refused_change_stores_nothing(con):
    _two_agents(con)
    for bad in (Change("set", "billing", 0), Change("set", "", 5_000),
                Change("cap", "fetch", 5_000), Change("set", "billing", True),
                Change("set_default", None, -1), Change("drop", "x")):
        with pytest.raises(DeclarationError):
            apply(con, bad)
    assert declarations(con) == []


def test_a_schema_3_file_gains_budget_source_and_the_declaration_tables(tmp_path):
    """Schema 3 → 4 (store/file/schema_migrations/3_to_4.sql): runs gain budget_source, 'span'
    wherever a budget is known (nothing could be declared before), and a declaration then
    re-measures the old runs."""
    con = open_db(tmp_path, "v3.duckdb")
    try:
        b = TraceBuilder()
        b.run(0, 9_000, 10_000, gen__ai_agent_name="billing")
        unbudgeted = b.run(0, 9_000, None, gen__ai_agent_name="billing")
        store(con, b.finished())
        con.execute("DROP TABLE declared_budgets")
        con.execute("DROP TABLE declared_step_caps")
        con.execute("DROP INDEX runs_by_run_id")
        con.execute("ALTER TABLE runs DROP COLUMN budget_source")
        con.execute("CREATE INDEX runs_by_run_id ON runs (run_id)")
        con.execute("UPDATE budgetscope_meta SET value = '3' WHERE key = 'schema_version'")
    finally:
        con.close()
    con = open_db(tmp_path, "v3.duckdb")
    try:
        assert con.execute("SELECT value FROM budgetscope_meta WHERE key = 'schema_version'"
                           ).fetchone()[0] == str(SCHEMA_VERSION)
        assert sorted(con.execute("SELECT budget_ms, budget_source FROM runs").fetchall(),
                      key=str) == [(10_000, "span"), (None, None)]
        declare(con, Change("set", "billing", 5_000))
        assert run_row(con, b.trace_id(unbudgeted))["budget_source"] == "declared"
    finally:
        con.close()


def test_a_cap_re_derives_only_traces_with_steps_lacking_their_own_allocation(con):
    b = TraceBuilder()
    own = b.run(0, 9_000, 10_000)
    b.step(own, "tool", "fetch", 1_000, 2_000, **{"budget.allocated_ms": 4_000})
    bare = b.run(0, 9_000, 10_000)
    b.step(bare, "tool", "fetch2", 1_000, 2_000, **{"budget.step.name": "fetch"})
    store(con, b.finished())
    applied = apply(con, Change("cap", "tool:fetch", 2_000))
    # only the second trace: the first one's step keeps its own 4000 ms whatever the cap
    assert (applied.runs, applied.traces) == (1, 1)
    PendingDerivations(refresh_touched).run(con)
    assert step_rows(con, b.trace_id(own))["tool fetch"]["utilisation"] == pytest.approx(0.25)
    assert step_rows(con, b.trace_id(bare))["tool fetch2"]["utilisation"] == pytest.approx(0.5)
