"""The dashboard's declared budgets (docs/guide.md#declaring-budgets) under Streamlit's AppTest: the
Budgets page lists what is declared and where runs' budgets came from; inside `budgetscope serve`
(its database owner and budget service installed in this process, with the real writer and
derivation) its forms change declarations and the runs follow; standalone it is read-only; the run
view names each run's budget source."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from budgetscope.cli import cli
from dashboard import fmt
from dashboard.config import DashboardConfig, configure, current
from store import Change, DatabaseOwner, DeclaredBudgets, DeclaredPrices, GroupCommitter, Source
from store.testing import refresh_touched
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


def table(at: AppTest, first: str) -> object:
    """The page's table whose first column is `first` (AppTest keeps no key of a table)."""
    return next(t for t in at.dataframe if list(t.value.columns)[:1] == [first])


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
    budgets = table(at, "agent").value
    assert list(budgets["agent"]) == ["billing"] and list(budgets["budget_ms"]) == [8_000]
    caps = table(at, "step_key").value
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
    assert list(table(at, "agent").value["budget_ms"]) == [8_000]

    # a default, then a cap for a key not seen yet
    at.selectbox(key="declare_agent").set_value("(default: every agent without its own)")
    at.text_input(key="declare_budget_text").input("1m")
    at.button(key="declare_submit").click().run()
    at.text_input(key="cap_key").input("tool:not_seen_yet")
    at.text_input(key="cap_text").input("2s")
    at.button(key="cap_submit").click().run()
    assert not at.exception
    assert list(table(at, "step_key").value["step_key"]) == [
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


# ---- tokens, dollars and prices (docs/metrics.md §10, §11.3, §11.5) -----------------------

def _priced_db(folder: Path) -> tuple[Path, str]:
    """billing: one run whose one model call of 1,000,000 in / 100,000 out tokens names a
    model no table prices (acme-secret)."""
    path = folder / "prices.duckdb"
    con = open_db(folder, path.name)
    try:
        b = TraceBuilder()
        run = b.run(0, 9_000, 20_000, gen__ai_agent_name="billing")
        b.step(run, "model", "acme-secret", 1_000, 7_000, **{
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "acme-secret",
            "gen_ai.usage.input_tokens": 1_000_000, "gen_ai.usage.output_tokens": 100_000})
        store(con, b.finished())
    finally:
        con.close()
    return path, b.trace_id(run)


@pytest.fixture
def served_prices(tmp_path: Path) -> Iterator[tuple[DatabaseOwner, str]]:
    db, run_id = _priced_db(tmp_path)
    owner = DatabaseOwner(db)
    committer = GroupCommitter(owner.cursor(), derive=refresh_touched)
    configure(DashboardConfig(Source(owner.path, owner=owner),  # as serve does
                              editor=DeclaredBudgets(owner, committer),
                              prices=DeclaredPrices(owner, committer)))
    try:
        yield owner, run_id
    finally:
        configure(None)
        committer.close(30)
        owner.close()


def _cost_of(owner: DatabaseOwner, run_id: str) -> tuple:
    cursor = owner.cursor()
    try:
        return cursor.execute(
            "SELECT cost_nano, cost_complete, usd_budget_nano, usd_budget_source, token_budget, "
            "usd_exhausted FROM runs WHERE run_id = ?", [run_id]).fetchone()
    finally:
        cursor.close()


@pytest.mark.slow
def test_inside_serve_it_declares_every_dimension_and_prices(served_prices) -> None:
    owner, run_id = served_prices
    assert _cost_of(owner, run_id) == (0, False, None, None, None, None)  # unpriced: unknown
    at = page("budgets")
    unpriced = table(at, "model").value
    assert list(unpriced["model"]) == ["acme-secret"] and list(unpriced["steps"]) == [1]
    # tokens, dollars a run and a week, the duration left as it is (none declared)
    at.selectbox(key="declare_agent").set_value("billing")
    at.text_input(key="declare_tokens_text").input("1.5M")
    at.text_input(key="declare_usd_text").input("0.50")
    at.text_input(key="declare_week_text").input("$20")
    at.button(key="declare_submit").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("1 run re" in s.value for s in at.success), [e.value for e in at.error]
    assert _cost_of(owner, run_id)[2:5] == (500_000_000, "declared", 1_500_000)
    declared = table(at, "agent").value
    assert list(declared["dollars a run"]) == ["$0.50"]
    assert list(declared["dollars a week"]) == ["$20.00"]
    assert list(declared["tokens"]) == ["1,500,000"]
    # bad input: the store's own message, nothing stored
    at.text_input(key="declare_usd_text").input("0.1234567891")
    at.button(key="declare_submit").click().run()
    assert any("more than 9 decimal places" in e.value.replace("\\", "") for e in at.error)
    # price the model: $1 in, $2 out per million tokens → 1 × 1 + 0.1 × 2 = $1.20, over the
    # run's $0.50
    at.selectbox(key="price_model").set_value("acme-secret")
    for key, value in (("price_input", "1"), ("price_output", "2")):
        at.text_input(key=key).input(value)
    at.button(key="price_submit").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("1 run re-measured" in s.value.replace("\\", "") for s in at.success), \
        [s.value for s in at.success] + [e.value for e in at.error]
    assert _cost_of(owner, run_id) == (1_200_000_000, True, 500_000_000, "declared",
                                       1_500_000, True)
    prices = table(at, "model").value
    assert list(prices["input"]) == ["$1"] and list(prices["provider"]) == ["(any provider)"]
    # a negative price is refused with the CLI's message
    at.selectbox(key="price_model").set_value("acme-secret")
    at.text_input(key="price_input").input("-1")
    at.button(key="price_submit").click().run()
    assert any("is negative" in e.value.replace("\\", "") for e in at.error)
    # remove the price, then the dollar dimension only
    at.button(key="unset_price_submit").click().run()
    assert _cost_of(owner, run_id)[:2] == (0, False)
    at.selectbox(key="remove_agent").set_value("billing")
    at.multiselect(key="remove_dimensions").set_value(["usd"])
    at.button(key="remove_submit").click().run()
    assert not at.exception
    assert _cost_of(owner, run_id)[2:5] == (None, None, 1_500_000)
