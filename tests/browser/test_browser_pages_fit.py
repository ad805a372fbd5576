"""Every page as a demanding user meets it at a 1400 px window: headless Debian
Chromium, each page waited for until Streamlit's script run is over, no skeleton is left and
its charts are drawn, then shot whole into test-artifacts/screenshots/ (page-<name>.png, and
<name>.png in a 1400 × 3200 window for the pages of TALL_SHOTS). On each page no table scrolls
sideways (a column cut on the right), no table cell reads Python's None or NaN, and no dialog
opened. What a page's text
says (its headers, the start to the minute, the empty database's page) is read under AppTest,
without a browser: tests/dashboard/test_dashboard_tables.py and
tests/dashboard/test_dashboard_pages.py."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from tests.support import ui

pytest.importorskip("playwright.sync_api")  # the browser fixture (conftest.py) drives it
CHROMIUM = ui.CHROMIUM
SHOTS = ui.REPO / "test-artifacts" / "screenshots"
QUERY = f"range=custom&since={ui.SINCE}&until={ui.UNTIL}"
WIDTH = 1400
TIMEOUT_MS = 120_000
# name -> (path, Plotly charts the page draws once it has finished)
PAGES = {"overview": ("", 3), "runs": ("runs", 0), "attribution": ("attribution", 3),
         "failures": ("failures", 3), "utilisation": ("utilisation", 3),
         "reconciliation": ("reconciliation", 2), "weekly": ("weekly", 0),
         "simulate": ("simulate", 2), "budgets": ("budgets", 0)}
# The pages also shot in a 1400 × 3200 window, as <name>.png.
TALL_SHOTS = ("overview", "attribution", "failures", "utilisation", "reconciliation", "weekly",
              "simulate")
# Cell texts that are a program's words for "no value", never a person's.
NOT_A_VALUE = {"None", "nan", "NaN", "NaT", "null", "<NA>"}

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")


@pytest.fixture()
def page(page: object) -> object:
    """conftest.py's tab, at 1400 × 1600."""
    page.set_viewport_size({"width": WIDTH, "height": 1600})  # type: ignore[attr-defined]
    return page


def finished(tab: object, charts: int = 0) -> None:
    """Wait until the page has drawn and any rerun it asked for (a URL it rewrote) has
    finished (ui.settle)."""
    ui.settle(tab, charts, timeout_ms=TIMEOUT_MS)


def shoot_whole(tab: object, name: str, charts: int = 0, tall: int | None = None) -> None:
    """The whole page: Streamlit scrolls an inner container, so the window is made as tall as
    the page before the shot (a full-page shot only holds what fits the window), or `tall`
    px high."""
    if tall is None:
        tall = min(max(ui.page_height(tab) + 120, 1600), 16_000)
    tab.set_viewport_size({"width": WIDTH, "height": tall})  # type: ignore[attr-defined]
    # Laid out again at the new size: the window has it, the page is still drawn with its
    # charts, and two frames have been painted since (a resize lays out in the next frame).
    tab.wait_for_function("(h) => window.innerHeight === h", arg=tall, timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(tab, charts, timeout_ms=TIMEOUT_MS)
    tab.evaluate("() => new Promise(done => requestAnimationFrame("  # type: ignore[attr-defined]
                 "() => requestAnimationFrame(done)))")
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def tables(tab: object) -> list[dict[str, object]]:
    """Each visible table: its key, how wide its content is against its box, its headers and
    the cells it drew. The grid draws on a canvas and keeps an accessible copy of the cells it
    renders: their text as given (a text column's "–", a literal "None"), but a number's raw
    value rather than its display and an empty string for a missing one, so the no-value mark
    of number columns (Streamlit's placeholder) is checked in
    tests/dashboard/test_dashboard_tables.py."""
    return tab.evaluate("""() => [...document.querySelectorAll('[data-testid=stDataFrame]')]
        .filter(t => t.offsetParent !== null && t.getBoundingClientRect().width > 0)
        .map(t => {
            const s = t.querySelector('.dvn-scroller');
            return {
                key: [...t.closest('[class*=st-key-]')?.classList || []]
                    .find(c => c.startsWith('st-key-')) || '',
                scroll: s ? s.scrollWidth : 0, box: s ? s.clientWidth : 0,
                headers: [...t.querySelectorAll('[role=columnheader]')].map(e => e.textContent),
                cells: [...t.querySelectorAll('[role=gridcell]')].map(e => e.textContent),
            };
        })""")  # type: ignore[attr-defined]


def check_tables(tab: object, name: str) -> list[dict[str, object]]:
    shown = tables(tab)
    for table in shown:
        assert table["scroll"] <= table["box"] + 1, (  # type: ignore[operator]
            f"{name}: table {table['key']} is {table['scroll']} px wide in a {table['box']} px "
            f"box: its right columns are cut ({table['headers']})")
        bad = sorted(set(table["cells"]) & NOT_A_VALUE)  # type: ignore[arg-type]
        assert not bad, f"{name}: table {table['key']} shows {bad}"
    return shown


def runs_of(db: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(cli, ["--db", db, "report", "runs", "--since", ui.SINCE,
                                      "--until", ui.UNTIL, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_draws_its_charts_fits_1400_px_and_shows_no_raw_missing_value(
        sample_app: ui.Dashboard, page: object, name: str) -> None:
    path, charts = PAGES[name]
    page.goto(f"{sample_app.url}/{path}?{QUERY}")  # type: ignore[attr-defined]
    finished(page, charts)
    assert page.locator(".js-plotly-plot").count() >= charts  # type: ignore[attr-defined]
    shown = check_tables(page, name)
    if name not in ("budgets",):
        assert shown, f"{name}: no table drawn"
    shoot_whole(page, f"page-{name}", charts)
    if name in TALL_SHOTS:
        shoot_whole(page, name, charts, tall=3200)
    assert not page.dialogs, page.dialogs  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["failed", "exhausted"])
def test_the_run_view_and_its_comparison_fit(sample_app: ui.Dashboard, page: object,
                                             kind: str) -> None:
    runs = runs_of(sample_app.db)  # type: ignore[attr-defined]
    run = next(r for r in runs if (r["outcome"] == "failed" if kind == "failed"
                                   else r["exhausted"] is True))
    page.goto(f"{sample_app.url}/run?{QUERY}&run={run['run_id']}")  # type: ignore[attr-defined]
    finished(page, 1)
    # The steps table, with the columns on-call reads first, none behind a horizontal scroll.
    wanted = {"step", "class", "role", "duration", "share", "utilisation"}
    # The grid fills its accessible copy (the headers tables() reads) after the run is over.
    page.wait_for_function(  # type: ignore[attr-defined]
        "(wanted) => [...document.querySelectorAll('[data-testid=stDataFrame]')].some(t => "
        "{ const h = new Set([...t.querySelectorAll('[role=columnheader]')]"
        ".map(e => e.textContent)); return wanted.every(w => h.has(w)); })",
        arg=sorted(wanted), timeout=TIMEOUT_MS)
    assert any(wanted <= set(t["headers"]) for t in check_tables(page, f"run-{kind}"))  # type: ignore[arg-type]
    shoot_whole(page, f"page-run-{kind}", 1)
    page.goto(f"{sample_app.url}/compare?{QUERY}&run={run['run_id']}")  # type: ignore[attr-defined]
    finished(page, 1)
    check_tables(page, f"compare-{kind}")
    shoot_whole(page, f"page-compare-{kind}", 1)
