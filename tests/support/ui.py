"""What the dashboard tests share: the sample traces in a DuckDB file (built once per test
session, through the same loader and derivation hook as `budgetscope ingest`), a database of
hostile span names, and the dashboard as a real subprocess on a free port (bench/support/
browser.py's, the one the benchmarks time, as is the measure of a page drawn)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.support.browser import (
    CHARTS_DRAWN,
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGE_DRAWN,
    Dashboard,
    free_port,
    wait_until_served,
)
from budgetscope.cli import cli
from budgetscope.config import SAMPLE_TRACES
from ingest.files.loader import load_files
from store import connect
from tests.support.paths import REPO
from tests.support.run_cache import built_once_a_run
from tests.support.trace_builder import TraceBuilder, open_db, store

__all__ = ["APP", "CHARTS_DRAWN", "CHROMIUM", "CHROMIUM_ARGS", "HOSTILE_AGENT", "HOSTILE_IMG",
           "HOSTILE_LINK", "PAGE_DRAWN", "QUERY", "REPO", "SAMPLE_TRACES", "SHOTS", "SINCE",
           "SETTLED", "TOKEN", "UNTIL", "Dashboard", "exhausted_run", "free_port", "heading",
           "hostile_db", "page_height", "sample_copy", "sample_db", "script_runs", "settle",
           "settle_after_runs", "shoot", "tiny_db", "wait_until_served"]
SETTLE_TIMEOUT_MS = 90_000

APP = REPO / "dashboard" / "streamlit_app.py"
# Two ISO weeks of the sample (W47 and W48), so that the overview has a previous period too.
SINCE, UNTIL = "2026-11-16", "2026-11-30"
# The sample's two weeks in a page's address.
QUERY = f"range=custom&since={SINCE}&until={UNTIL}"
# Where the browser tests' screenshots go (CI keeps them as artifacts).
SHOTS = REPO / "test-artifacts" / "screenshots"
HOSTILE_IMG = "<img src=x onerror=alert(1)>"
HOSTILE_LINK = "[click](javascript:alert(1))"
HOSTILE_AGENT = "<script>alert(2)</script>"


def sample_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not SAMPLE_TRACES.exists():
        pytest.skip(f"{SAMPLE_TRACES} is not there yet")

    def build(path: Path) -> None:
        con = connect(path)
        try:
            summary = load_files(con, [SAMPLE_TRACES], derive=True)
        finally:
            con.close()
        assert not summary.rejections

    # once a run, not once an xdist worker: each worker takes a copy of its own
    return str(built_once_a_run(tmp_path_factory, "sample.duckdb", build))


def sample_copy(tmp_path_factory: pytest.TempPathFactory, name: str = "sample") -> Path:
    """A copy of the session's sample (sample_db), for a test or module that writes to it or
    holds it as a server does. Loading and deriving the 52,169 spans again costs 8 s on a quiet
    machine and 35 s on 2 loaded cores; copying the file, well under a second. The session's
    file itself is only ever read."""
    copy = tmp_path_factory.mktemp(name) / "sample.duckdb"
    shutil.copyfile(sample_db(tmp_path_factory), copy)
    return copy


def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One exhausted run whose agent, steps, tool names and keys are HTML and Markdown."""

    def build(path: Path) -> None:
        b = TraceBuilder(seed=99)
        run = b.span("agent run", 0, 12_000, attributes={
            "budget.total_ms": 10_000, "budget.run.outcome": "exhausted",
            "gen_ai.agent.name": HOSTILE_AGENT})
        b.step(run, "tool", HOSTILE_IMG, 0, 8_000)
        b.step(run, "tool", HOSTILE_LINK, 8_000, 12_000, **{
            "budget.side_effect": "write", "budget.effect_status": "possible",
            "budget.idempotency_key": HOSTILE_IMG, "budget.outcome": "client_timeout"})
        con = connect(path)
        try:
            store(con, b.finished())
        finally:
            con.close()

    return str(built_once_a_run(tmp_path_factory, "hostile.duckdb", build))


# A JavaScript function of n: PAGE_DRAWN, and no element is stale. Streamlit marks the
# elements of the previous run `data-stale="true"` while a run goes on and clears them only when
# a run finishes successfully; a run that ended early for another (st.rerun, st.switch_page: the
# script state reads "notRunning" between the two) leaves them, so this holds only once the last
# run the page asked for has finished.
SETTLED = (f"(n) => ({PAGE_DRAWN})(n)"
           " && !document.querySelector('[data-stale=\"true\"]')")
# Installs (once per document) a counter of the page's script runs, started and finished, from
# the changes of the app's script state: `window.budgetscopeRuns`. A timer's run (the
# watcher's fragment) counts as well as a whole page's.
_COUNT_RUNS = """() => {
  if (!window.budgetscopeRuns) {
    const runs = window.budgetscopeRuns = {started: 0, finished: 0};
    const state = () => document.querySelector('[data-test-script-state]')
      ?.getAttribute('data-test-script-state');
    let last = state();
    new MutationObserver(() => {
      const now = state();
      if (now === last) return;
      if (now === 'running') runs.started++;
      else if (last === 'running') runs.finished++;
      last = now;
    }).observe(document.documentElement, {subtree: true, childList: true, attributes: true,
                                          attributeFilter: ['data-test-script-state']});
  }
  return window.budgetscopeRuns.started;
}"""


def settle(tab: object, charts: int = 0, timeout_ms: int = SETTLE_TIMEOUT_MS) -> None:
    """Wait until the page in `tab` has drawn with `charts` charts and the last run it asked for
    has finished (SETTLED), and fail if the page shows an exception. No fixed pause: a rerun
    the page asked for (an address it rewrote, st.switch_page) leaves the previous run's
    elements stale until it finishes, which SETTLED waits out."""
    tab.wait_for_function(SETTLED, arg=charts, timeout=timeout_ms)  # type: ignore[attr-defined]
    exception = tab.locator('[data-testid="stException"]')  # type: ignore[attr-defined]
    assert exception.count() == 0, exception.first.inner_text()


def script_runs(tab: object) -> int:
    """How many script runs the page in `tab` has started since this was first called on it
    (it starts counting then)."""
    return tab.evaluate(_COUNT_RUNS)  # type: ignore[attr-defined]


def settle_after_runs(tab: object, runs: int, charts: int = 0,
                      timeout_ms: int = SETTLE_TIMEOUT_MS) -> None:
    """settle, once the page has started `runs` script runs in all (script_runs counts them):
    `settle_after_runs(tab, script_runs(tab) + 2)` waits until two runs that began after the
    call have finished, a timer's check and the redraw it asked for."""
    tab.wait_for_function(  # type: ignore[attr-defined]
        f"([runs, n]) => window.budgetscopeRuns.started >= runs && ({SETTLED})(n)",
        arg=[runs, charts], timeout=timeout_ms)
    settle(tab, charts, timeout_ms)


# The token the access tests start a dashboard with.
TOKEN = "s3cret-Token_4242"


def tiny_db(path: Path) -> str:
    """One exhausted run whose step's name has quotes, an ampersand and HTML in it."""
    b = TraceBuilder(seed=5)
    run = b.run(0, 12_000, 10_000, gen__ai_agent_name="support-agent",
                budget_run_outcome="exhausted")
    b.step(run, "tool", 'say "hi" & <b>bold</b>', 0, 11_000, **{"budget.outcome": "client_timeout"})
    con = open_db(path.parent, path.name)
    store(con, b.finished())
    con.close()
    return str(path)


def page_height(tab: object) -> int:
    """The height of the page's content in px: Streamlit scrolls an inner container, so a
    full-page shot holds only what fits the window, and a whole-page shot first makes the window
    this tall."""
    return int(tab.evaluate(  # type: ignore[attr-defined]
        "Math.max(...[...document.querySelectorAll('[data-testid=stMain], "
        "[data-testid=stMainBlockContainer], [data-testid=stSidebarContent]')]"
        ".map(e => e.scrollHeight))"))


def shoot(tab: object, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def heading(tab: object) -> str:
    return tab.locator("[data-testid=stMain] h1").first.inner_text().strip()  # type: ignore[attr-defined]


def exhausted_run(db: str) -> str:
    result = CliRunner().invoke(cli, ["--db", db, "report", "runs", "--since", SINCE,
                                      "--until", UNTIL, "--format", "json"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.output)
    return next(r["run_id"] for r in runs if r["exhausted"] is True)
