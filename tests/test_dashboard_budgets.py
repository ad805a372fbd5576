"""The dashboard's declared budgets (SPEC §10) under Streamlit's AppTest: the Budgets
page lists what is declared and where runs' budgets came from; inside `budgetscope serve` (its
database owner and budget service installed in this process, with the real writer and
derivation) its forms change declarations and the runs follow; standalone it is read-only;
the run view names each run's budget source."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from budgetscope.cli import cli
from dashboard import fmt
from dashboard.config import DashboardConfig, configure, current
from store import Change, DatabaseOwner, DeclaredBudgets, GroupCommitter, Source, refresh_touched
from tests.support import ui
from tests.support.trace_builder import TraceBuilder, open_db, store


def _db(folder: Path) -> tuple[Path, str, str]:
    """billing: one run without a budget, one with its own 20 s (ids returned)."""
    path = folder / "budgets.duckdb"
    con = open_db(folder, path.name)
    try:
        b = TraceBuilder()
        run = b.run(0, 9_000, None, gen__ai_agent_name="billing")
        b.step(run, "tool", "fetch", 1_000, 7_000)
        own = b.run(0, 9_000, 20_000, gen__ai_agent_name="billing")
        b.step(own, "tool", "fetch", 1_000, 7_000)
        store(con, b.finished())
    finally:
        con.close()
    return path, b.trace_id(run), b.trace_id(own)


def page(name: str, params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ui.APP), default_timeout=120)
    at.query_params["range"] = "all"
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.switch_page(f"app_pages/{name}.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


@pytest.mark.slow
def test_standalone_it_lists_declarations_read_only(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    db, _, _ = _db(tmp_path)
    for arguments in (["set", "billing", "8s"], ["cap", "tool:fetch", "3s"]):
        result = CliRunner().invoke(cli, ["--db", str(db), "budgets", *arguments])
        assert result.exit_code == 0, result.output
    monkeypatch.setenv("BUDGETSCOPE_DB", str(db))
    at = page("budgets")
    assert metrics(at)["Runs with their own budget"] == "1"
    assert metrics(at)["Runs measured against a declared budget"] == "1"
    budgets = at.dataframe[0].value
    assert list(budgets["agent"]) == ["billing"] and list(budgets["budget_ms"]) == [8_000]
    caps = at.dataframe[1].value
    assert list(caps["step_key"]) == ["tool:fetch"] and list(caps["cap_ms"]) == [3_000]
    assert any("Read-only here" in info.value for info in at.info)
    assert [b.key for b in at.button] == ["reload"]  # no forms: it does not own the file


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[DatabaseOwner, str]]:
    db, declared_run, _ = _db(tmp_path)
    owner = DatabaseOwner(db)
    committer = GroupCommitter(owner.cursor(), derive=refresh_touched)
    configure(DashboardConfig(Source(owner.path, owner=owner),  # as serve does
                              editor=DeclaredBudgets(owner, committer)))
    try:
        yield owner, declared_run
    finally:
        configure(None)
        committer.close(30)
        owner.close()


def _runs(owner: DatabaseOwner) -> list[tuple]:
    cursor = owner.cursor()
    try:
        return cursor.execute("SELECT budget_ms, budget_source FROM runs "
                              "ORDER BY budget_ms NULLS FIRST").fetchall()
    finally:
        cursor.close()


@pytest.mark.slow
def test_inside_serve_the_forms_change_declarations_and_the_runs_follow(served) -> None:
    owner, _ = served
    at = page("budgets")
    assert metrics(at)["Runs with no budget"] == "1"
    at.selectbox(key="declare_agent").set_value("billing")
    at.text_input(key="declare_budget_text").input("8s")
    at.button(key="declare_submit").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("1 run re" in s.value for s in at.success), [s.value for s in at.success] + \
        [e.value for e in at.error]
    assert _runs(owner) == [(8_000, "declared"), (20_000, "span")]
    assert metrics(at)["Runs measured against a declared budget"] == "1"
    assert list(at.dataframe[0].value["budget_ms"]) == [8_000]

    # a default, then a cap for a key not seen yet
    at.selectbox(key="declare_agent").set_value("(default: every agent without its own)")
    at.text_input(key="declare_budget_text").input("1m")
    at.button(key="declare_submit").click().run()
    at.text_input(key="cap_key").input("tool:not_seen_yet")
    at.text_input(key="cap_text").input("2s")
    at.button(key="cap_submit").click().run()
    assert not at.exception
    assert list(at.dataframe[1].value["step_key"]) == [
        "tool:not_seen_yet"]

    # bad input: a message naming the problem, nothing stored
    at.selectbox(key="declare_agent").set_value("billing")
    at.text_input(key="declare_budget_text").input("0s")
    at.button(key="declare_submit").click().run()
    assert any("is zero" in e.value.replace("\\", "") for e in at.error)
    at.text_input(key="declare_budget_text").input("45")
    at.button(key="declare_submit").click().run()
    assert any("has no unit" in e.value.replace("\\", "") for e in at.error)
    at.text_input(key="cap_key").input("fetch")
    at.text_input(key="cap_text").input("2s")
    at.button(key="cap_submit").click().run()
    assert any("not kind:name" in e.value.replace("\\", "") for e in at.error)
    assert _runs(owner) == [(8_000, "declared"), (20_000, "span")]

    # remove billing's: the default (60 s) takes over
    at.selectbox(key="remove_agent").set_value("billing")
    at.button(key="remove_submit").click().run()
    assert not at.exception
    assert _runs(owner) == [(20_000, "span"), (60_000, "declared")]


@pytest.mark.slow
def test_the_run_view_names_the_budget_source(served) -> None:
    _, declared_run = served
    at = page("run", {"run": declared_run})
    assert any("no declared budget" in w.value for w in at.warning)
    service = current().editor
    assert service is not None
    service.apply(Change("set", "billing", 8_000))
    at = page("run", {"run": declared_run})
    assert any("**declared**" in c.value for c in at.caption)
    budget = next(m for m in at.metric if m.label == "Budget")
    assert budget.value == fmt.duration(8_000)
