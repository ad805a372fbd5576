"""On-call's first screen and first contact in a real browser (Debian's Chromium, headless):
culprit and holder named with their numbers and "another call of the same step" when they share
a key; the holder × culprit matrix on one key order with its diagonal, a cell opening its runs;
the run view's summary block above the fold and a mark on a 0 ms refusal and a 9 ms upstream
failure; and `budgetscope demo` opening on the sample's own runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from store import connect
from tests.support import ui
from tests.support.trace_builder import TraceBuilder, store

pytest.importorskip("playwright.sync_api")  # the browser fixture (conftest.py) drives it

QUERY = ui.QUERY
TIMEOUT_MS = 90_000
heading, shoot = ui.heading, ui.shoot

# A run's first screen at 1400 × 900: what shows without scrolling.
ABOVE_THE_FOLD = {"width": 1400, "height": 900}


def _runs(db: str, *extra: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["--db", db, "report", "runs", "--since", ui.SINCE,
                                      "--until", ui.UNTIL, "--format", "json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _main_text(tab: object) -> str:
    return tab.locator("[data-testid=stMain]").inner_text()  # type: ignore[attr-defined]


def test_two_calls_of_one_step_are_numbered_and_told_apart(sample_app: ui.Dashboard,
                                                           page: object) -> None:
    """A run whose culprit and holder share a step key but are two calls reads "#3 … #9 …,
    another call of the same step", in the summary above the fold, the steps table and the
    waterfall; a run whose culprit is its holder reads "the same call"."""
    runs = _runs(sample_app.db, "--exhausted")  # type: ignore[attr-defined]
    two = next(r for r in runs if r["culprit"] == r["holder"]
               and r["culprit_step"] != r["holder_step"])
    one = next(r for r in runs if r["culprit_step"] == r["holder_step"])
    tab = page
    tab.set_viewport_size(ABOVE_THE_FOLD)  # type: ignore[attr-defined]
    tab.goto(f"{sample_app.url}/run?{QUERY}&run={two['run_id']}")
    ui.settle(tab, charts=1)
    culprit = f"#{two['culprit_step']} {two['culprit']}"
    holder = f"#{two['holder_step']} {two['holder']}"
    summary = tab.locator(".st-key-run_summary")
    assert summary.is_visible()
    box = summary.bounding_box()
    assert box is not None and box["y"] + box["height"] <= ABOVE_THE_FOLD["height"], box
    said = summary.inner_text()
    assert f"Culprit {culprit}:" in said, said
    assert f"Holder {holder}" in said and "another call of the same step" in said, said
    assert "Failures:" in said and "Next step:" in said
    # the waterfall names the rows as the summary names the steps
    labels = tab.evaluate("[...document.querySelector('.js-plotly-plot').data]"
                          ".flatMap(t => t.type === 'bar' && (t.yaxis || 'y') === 'y'"
                          " ? t.y : [])")
    assert any(label.strip(" └") == culprit for label in labels), labels[:5]
    assert any(label.strip(" └") == holder for label in labels)
    shoot(tab, "run-two-calls-of-one-step")

    tab.goto(f"{sample_app.url}/run?{QUERY}&run={one['run_id']}")
    ui.settle(tab, charts=1)
    said = tab.locator(".st-key-run_summary").inner_text()
    assert "It is also the holder" in said and "the same call" in said, said


def test_the_matrix_shares_one_key_order_and_a_cell_opens_its_runs(
        sample_app: ui.Dashboard, page: object) -> None:
    page.goto(f"{sample_app.url}/attribution?{QUERY}")  # type: ignore[attr-defined]
    ui.settle(page, 3)
    figure = page.evaluate(  # type: ignore[attr-defined]
        "(() => { const c = [...document.querySelectorAll('.js-plotly-plot')]"
        ".find(p => (p._fullLayout.title.text || '').includes('Holder')); return "
        "{x: c._fullLayout.xaxis.categoryarray, y: c._fullLayout.yaxis.categoryarray, "
        "shapes: c._fullLayout.shapes.length, data: c.data[0]}; })()")
    assert figure["x"] == figure["y"] and figure["shapes"] >= 1
    cells = list(zip(figure["data"]["x"], figure["data"]["y"], figure["data"]["text"],
                     strict=True))
    # a cell on the diagonal, with more than one run: click it
    holder_key, culprit_key, count = next((x, y, int(n)) for x, y, n in cells
                                          if x == y and x != "(other)" and int(n) > 1)
    index = cells.index((holder_key, culprit_key, str(count)))
    chart = page.locator(".stPlotlyChart").filter(  # type: ignore[attr-defined]
        has_text="Holder × culprit")
    chart.locator(".scatterlayer .point").nth(index).click(force=True)
    page.wait_for_url("**/runs?**", timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(page)
    assert heading(page) == "Runs"
    params = dict(parse_qsl(urlsplit(page.url).query))  # type: ignore[attr-defined]
    assert (params["exhausted"], params["holder"], params["culprit"]) == (
        "yes", holder_key, culprit_key)
    assert f"**{count:,}**" not in _main_text(page)  # Markdown drawn, not shown
    assert f"{count:,} runs match" in _main_text(page)
    shoot(page, "runs-from-matrix-cell")


@pytest.fixture(scope="module")
def refusal_app(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One exhausted run: a tool that used its allocation, a 0 ms refusal, a 9 ms upstream
    failure (HTTP 503) and an orphan write with its idempotency key."""
    path = tmp_path_factory.mktemp("refusal") / "refusal.duckdb"
    con = connect(path)
    b = TraceBuilder(seed=36)
    run = b.run(0, 10_500, 10_000, gen__ai_agent_name="oncall-agent",
                budget_run_outcome="exhausted")
    b.step(run, "tool", "fetch_report", 0, 9_000, **{
        "budget.cap_ms": 9_000, "budget.allocated_ms": 9_000,
        "budget.outcome": "client_timeout"})
    b.step(run, "tool", "issue_refund", 9_000, 9_000, **{"budget.outcome": "refused"})
    b.step(run, "tool", "lookup", 9_100, 9_109, **{"http.response.status_code": 503})
    b.step(run, "tool", "pay", 9_200, 10_500, **{
        "budget.side_effect": "write", "budget.idempotency_key": "pay-36",
        "budget.outcome": "client_timeout"})
    store(con, b.finished())
    con.close()
    app = ui.Dashboard(str(path), tmp_path_factory.mktemp("logs") / "refusal.log")
    app.run_id = b.trace_id(run)  # type: ignore[attr-defined]
    yield app
    app.stop()


def test_the_summary_block_and_a_mark_on_a_0_ms_refusal(refusal_app: ui.Dashboard,
                                                        browser: object) -> None:
    context = browser.new_context(viewport=ABOVE_THE_FOLD)  # type: ignore[attr-defined]
    tab = context.new_page()
    try:
        tab.goto(f"{refusal_app.url}/run?range=all&run={refusal_app.run_id}")  # type: ignore[attr-defined]
        ui.settle(tab, charts=1)
        summary = tab.locator(".st-key-run_summary")
        said = summary.inner_text()
        assert "Culprit #1 tool:fetch_report" in said, said
        assert "1 refused (#2)" in said and "1 upstream failure (#3)" in said, said
        assert "pay-36" in said and "read it back before retrying" in said, said
        assert "Next step: Read back key pay-36 of #4 tool:pay" in said, said
        box = summary.bounding_box()
        assert box is not None and box["y"] + box["height"] <= ABOVE_THE_FOLD["height"], box
        # every failed step is marked, the 0 ms refusal and the 9 ms failure included: the
        # marker trace holds their rows, and its points are drawn
        marks = tab.evaluate(
            "(() => { const c = document.querySelector('.js-plotly-plot'); "
            "const i = c.data.findIndex(t => (t.name || '').startsWith('failed')); "
            "return {rows: c.data[i].y, drawn: c.querySelectorAll('.scatterlayer .trace')[0]"
            " ? [...c.querySelectorAll('.scatterlayer .trace')].map(t => "
            "t.querySelectorAll('.point').length) : []}; })()")
        rows = [row.strip(" └") for row in marks["rows"]]
        assert rows == ["#1 tool:fetch_report", "#2 tool:issue_refund", "#3 tool:lookup",
                        "#4 tool:pay"], rows
        assert 4 in marks["drawn"], marks["drawn"]
        shoot(tab, "run-refusal-first-screen")
    finally:
        context.close()


def test_step_details_show_the_error_text_as_text(refusal_app: ui.Dashboard,
                                                  page: object) -> None:
    page.goto(f"{refusal_app.url}/run?range=all&run={refusal_app.run_id}")  # type: ignore[attr-defined]
    ui.settle(page, charts=1)
    assert "Step details" in _main_text(page)
    # opened on the first failed step (its status, attributes and events are tables below)
    picker = page.locator("[data-testid=stSelectbox]").filter(  # type: ignore[attr-defined]
        has_text="Step")
    shown = picker.inner_text() + " " + " ".join(
        field.input_value() for field in picker.locator("input").all())
    assert "#1 tool:fetch_report · client_timeout" in shown, shown
    tables = page.locator("[data-testid=stDataFrame]")  # type: ignore[attr-defined]
    before = tables.count()
    page.get_by_text("Why is each span (not) a step?").click()  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        f"document.querySelectorAll('[data-testid=stDataFrame]').length > {before}",
        timeout=TIMEOUT_MS)
    ui.settle(page, charts=1)  # the explanation's table (a canvas: its text is not DOM)
    shoot(page, "run-refusal-details")


def test_the_demo_opens_on_the_samples_runs(tmp_path: Path,
                                            page: object) -> None:
    """`budgetscope demo` on a fresh folder: its first screen holds the sample's 1,800 runs
    (it held 24 under "Last 7 days"), as the table the terminal printed did."""
    port = ui.free_port()
    log = tmp_path / "demo.log"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("BUDGETSCOPE_")}
    process = subprocess.Popen(
        [sys.executable, "-c", "from budgetscope.cli import main; main()", "demo", "--port",
         str(port)], cwd=tmp_path, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        assert ui.wait_until_served(url, process, 240), f"the demo did not start: {log.read_text()}"
        printed = log.read_text()
        assert f"{url}/?range=custom&since=2026-10-26&until=2026-11-30" in printed, printed
        page.goto(url)  # type: ignore[attr-defined]
        ui.settle(page, 3)
        metrics = page.locator("[data-testid=stMetric]").all_inner_texts()  # type: ignore[attr-defined]
        runs = next(m for m in metrics if m.startswith("Runs"))
        assert "1,800" in runs, metrics
        assert "2026-10-26 → 2026-11-30" in _main_text(page)
        shoot(page, "demo-first-screen")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
