"""The dashboard in a real browser: Debian's Chromium, headless, driven by Playwright, against
`budgetscope dashboard` running as a subprocess on the sample traces. The sidebar navigates, a
run opens from the overview list and by deep link, the weekly CSV download is the CLI's bytes,
and hostile span names show as text. That every page draws its charts (and its shot in
test-artifacts/screenshots/) is checked with the page's other checks at 1400 px, in
tests/browser/test_browser_narrow.py (tests/support/page_fit.py's checks; the failed run's view and
comparison in tests/browser/test_browser_pages_fit.py): one page load for all."""

from __future__ import annotations

import re
import shutil
from contextlib import closing
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, urlsplit

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from store import connect
from tests.support import ui
from tests.support.trace_builder import TraceBuilder, store

pytest.importorskip("playwright.sync_api")  # the browser fixture (conftest.py) drives it
CHROMIUM = ui.CHROMIUM
QUERY = ui.QUERY
# page path -> Plotly charts drawn on it (the utilisation CDF sits in a hidden tab)
PAGES = {"": 3, "attribution": 3, "failures": 3, "utilisation": 3, "reconciliation": 2,
         "weekly": 0, "simulate": 2}
TIMEOUT_MS = 90_000

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")


_HINTED = ("[...document.head.querySelectorAll('link[rel=modulepreload]')].map(l => l.href)"
           ".filter(href => /\\/(PlotlyChart|DataFrame)\\./.test(href))")
_FETCHED = ("performance.getEntriesByType('resource').map(r => r.name)"
            ".filter(name => /\\/js\\/(PlotlyChart|DataFrame)\\./.test(name))")


def _chunk_kinds(addresses: list[str]) -> list[str]:
    return sorted(address.rsplit("/", 1)[1].split(".")[0] for address in addresses)


def test_the_preload_names_the_chunks_the_page_loads(sample_app: ui.Dashboard,
                                                     cold_page: object) -> None:
    """The page's HTML preloads (dashboard/server/page_head.py) the very files the charts
    and tables then import: each is fetched once, by the name in the hint."""
    page = cold_page  # a first visit: nothing cached
    page.goto(f"{sample_app.url}/attribution?{QUERY}")  # type: ignore[attr-defined]
    ui.settle(page, PAGES["attribution"])
    hinted = page.evaluate(_HINTED)  # type: ignore[attr-defined]
    assert _chunk_kinds(hinted) == ["DataFrame", "PlotlyChart"]
    fetched = page.evaluate(_FETCHED)  # type: ignore[attr-defined]
    assert sorted(fetched) == sorted(hinted)


def test_a_page_without_charts_does_not_fetch_the_chart_code(sample_app: ui.Dashboard,
                                                             cold_page: object) -> None:
    """Runs draws tables only: its HTML preloads the table code, not the 4.7 MB chart code, and
    its first visit fetches no chart code at all."""
    page = cold_page  # a first visit: nothing cached
    page.goto(f"{sample_app.url}/runs?{QUERY}")  # type: ignore[attr-defined]
    ui.settle(page, 0)
    assert ui.heading(page) == "Runs"
    assert _chunk_kinds(page.evaluate(_HINTED)) == ["DataFrame"]  # type: ignore[attr-defined]
    assert _chunk_kinds(page.evaluate(_FETCHED)) == ["DataFrame"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", ["attribution", "runs/"])
def test_a_page_address_connects_and_navigates_from_there(
        sample_app: ui.Dashboard, cold_page: object, path: str) -> None:
    """Opened at a page's address, the client finds its server at the root at once (told by
    dashboard/server/page_head.py, it never asks `/attribution/_stcore/health`, a 404 and a
    retry), and the sidebar's links from there lead to the pages at the root, not under the
    page."""
    page = cold_page  # a first visit: nothing cached
    asked: list[str] = []
    page.on("request", lambda request: asked.append(urlsplit(request.url).path))  # type: ignore[attr-defined]
    page.goto(f"{sample_app.url}/{path}?{QUERY}")  # type: ignore[attr-defined]
    ui.settle(page, 3 if path == "attribution" else 0)
    assert ui.heading(page) == ("Attribution" if path == "attribution" else "Runs")
    assert "/_stcore/health" in asked and "/_stcore/host-config" in asked
    assert [p for p in asked if "/_stcore/" in p and not p.startswith("/_stcore/")] == []
    nav = page.locator('[data-testid="stSidebarNav"]')  # type: ignore[attr-defined]
    nav.get_by_text("Failures", exact=True).click()
    page.wait_for_url(re.compile(r"/failures\?"), timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(page, PAGES["failures"])
    assert ui.heading(page) == "Failures"
    assert urlsplit(page.url).path == "/failures"  # type: ignore[attr-defined]
    assert parse_qs(urlsplit(page.url).query)["since"] == [ui.SINCE]  # type: ignore[attr-defined]


def test_run_view_by_deep_link(sample_app: ui.Dashboard, page: object) -> None:
    run_id = ui.exhausted_run(sample_app.db)  # type: ignore[attr-defined]
    page.goto(f"{sample_app.url}/run?{QUERY}&run={run_id}")  # type: ignore[attr-defined]
    ui.settle(page, 1)
    assert ui.heading(page) == "Run view"
    assert run_id in page.locator("body").inner_text()  # type: ignore[attr-defined]
    ui.shoot(page, "run")
    # A link to the root with ?run= (pasted into a chat) opens the same view.
    page.goto(f"{sample_app.url}/?run={run_id}")  # type: ignore[attr-defined]
    ui.settle(page, 1)
    assert ui.heading(page) == "Run view"
    assert urlsplit(page.url).path.endswith("/run")  # type: ignore[attr-defined]


def test_overview_typed_by_hand_forwards_to_the_root(sample_app: ui.Dashboard,
                                                    page: object) -> None:
    page.goto(f"{sample_app.url}/overview?{QUERY}&agent=support-agent")  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/\?"), timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(page, 3)
    assert ui.heading(page) == "Overview"
    params = parse_qs(urlsplit(page.url).query)  # type: ignore[attr-defined]
    assert params["since"] == [ui.SINCE] and params["agent"] == ["support-agent"]


def test_an_open_page_follows_new_spans(tmp_path: Path, page: object) -> None:
    """Nobody touches the page: spans stored by another process show on it by themselves."""
    db = str(tmp_path / "growing.duckdb")
    builder = TraceBuilder(seed=7)
    builder.span("first run", 0, 1_000, attributes={"budget.total_ms": 5_000})
    with closing(connect(db)) as con:
        store(con, builder.finished())
    app = ui.Dashboard(db, tmp_path / "growing.log", refresh_seconds=1)
    try:
        page.goto(f"{app.url}/?range=all")  # type: ignore[attr-defined]
        ui.settle(page)
        sidebar = page.locator('[data-testid="stSidebar"]')  # type: ignore[attr-defined]
        assert "runs   1" in sidebar.inner_text()
        more = TraceBuilder(seed=8)
        for n in range(2):
            more.span(f"run {n}", 0, 1_000, attributes={"budget.total_ms": 5_000})
        with closing(connect(db)) as con:
            store(con, more.finished())
            # Still holding the file (as `budgetscope ingest` does): the redraw the commit
            # brought finds it busy and says so; closing it must bring another redraw.
            page.wait_for_function(  # type: ignore[attr-defined]
                "() => document.body.innerText.includes('The database file is busy')",
                timeout=30_000)
        page.wait_for_function(  # type: ignore[attr-defined]
            "() => document.querySelector('[data-testid=stSidebar]').innerText"
            ".includes('runs   3')", timeout=30_000)
        ui.settle(page)
    finally:
        app.stop()


def test_new_spans_after_a_quick_page_switch_keep_the_filters(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, browser: object) -> None:
    """A link opened and left through the sidebar at once (its page still drawing, as a quick
    reader or a benchmark does): the next page keeps the link's filters, and so does the redraw
    that new spans bring there. Streamlit's timer runs of the watcher used to see the sidebar's
    selectboxes back at their first option, and the redraw then showed "Last 24 hours" and all
    agents (found by bench_dashboard's navigation). The timing varies, so three tabs try it."""
    db = tmp_path / "growing.duckdb"
    shutil.copyfile(ui.sample_db(tmp_path_factory), db)
    app = ui.Dashboard(str(db), tmp_path / "growing.log", refresh_seconds=1)
    query = f"{QUERY}&agent=support-agent"
    try:
        for attempt in range(3):
            context = browser.new_context(viewport={"width": 1400, "height": 2400})  # type: ignore[attr-defined]
            tab = context.new_page()
            tab.goto(f"{app.url}/attribution?{query}")
            tab.locator('[data-testid="stSidebarNav"]').get_by_text(
                "Overview", exact=True).click()
            tab.wait_for_url(re.compile(r"/\?"), timeout=TIMEOUT_MS)
            ui.settle(tab, PAGES[""])
            sidebar_before = tab.locator('[data-testid="stSidebar"]').inner_text()
            # The watcher's timer runs (every second) before the new spans come: two of its
            # runs begun from here have finished.
            ui.settle_after_runs(tab, ui.script_runs(tab) + 2)
            more = TraceBuilder(seed=8 + attempt, service="support-agent")
            more.span(f"one more run {attempt}", 0, 1_000, attributes={"budget.total_ms": 5_000})
            with closing(connect(str(db))) as con:
                store(con, more.finished())
            tab.wait_for_function(
                "(before) => document.querySelector('[data-testid=stSidebar]').innerText"
                " !== before", arg=sidebar_before, timeout=30_000)
            ui.settle(tab)
            assert parse_qsl(urlsplit(tab.url).query) == parse_qsl(query), attempt
            shown = {label: tab.locator(
                f'[data-testid="stSidebar"] input[aria-label="{label}"]').input_value()
                for label in ("Time range", "Agent")}
            assert shown == {"Time range": "Custom (UTC)", "Agent": "support-agent"}, attempt
            assert ui.heading(tab) == "Overview"
            context.close()
    finally:
        app.stop()


def test_navigation_keeps_the_filters(sample_app: ui.Dashboard, page: object) -> None:
    page.goto(f"{sample_app.url}/?{QUERY}&agent=support-agent")  # type: ignore[attr-defined]
    ui.settle(page, 3)
    nav = page.locator('[data-testid="stSidebarNav"]')  # type: ignore[attr-defined]
    for title, path in (("Attribution", "attribution"), ("Failures", "failures"),
                        ("Weekly report", "weekly"), ("Overview", "")):
        nav.get_by_text(title, exact=True).click()
        page.wait_for_url(re.compile(rf"/{path}\?"), timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
        ui.settle(page)
        assert ui.heading(page) == title
        params = parse_qs(urlsplit(page.url).query)  # type: ignore[attr-defined]
        assert params["since"] == [ui.SINCE] and params["agent"] == ["support-agent"]


def test_run_opens_from_the_overview_list(sample_app: ui.Dashboard, page: object) -> None:
    page.goto(f"{sample_app.url}/?{QUERY}")  # type: ignore[attr-defined]
    ui.settle(page, 3)
    page.get_by_text("Open this run").click()  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/run\?"), timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(page, 1)
    assert ui.heading(page) == "Run view"
    run_id = parse_qs(urlsplit(page.url).query)["run"][0]  # type: ignore[attr-defined]
    assert run_id in page.locator("body").inner_text()  # type: ignore[attr-defined]
    # Selecting a row of the list (the table is a canvas: click its first row's marker) opens
    # that run too, once: back on the overview, it stays there.
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Overview", exact=True).click()  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/\?"), timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(page, 3)
    grid = page.locator('[data-testid="stDataFrame"]').first  # type: ignore[attr-defined]
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 14, box["y"] + 35 + 17)  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/run\?"), timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(page, 1)
    assert ui.heading(page) == "Run view"
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Overview", exact=True).click()  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/\?"), timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(page, 3)
    assert ui.heading(page) == "Overview"


def test_weekly_csv_download_equals_the_cli(sample_app: ui.Dashboard, page: object) -> None:
    page.goto(f"{sample_app.url}/weekly?{QUERY}&agent=support-agent")  # type: ignore[attr-defined]
    ui.settle(page)
    with page.expect_download(timeout=TIMEOUT_MS) as download:  # type: ignore[attr-defined]
        page.get_by_text("Download CSV").click()  # type: ignore[attr-defined]
    downloaded = Path(download.value.path()).read_bytes()
    cli_output = CliRunner().invoke(cli, [
        "--db", sample_app.db, "report", "weekly", "--since", ui.SINCE,  # type: ignore[attr-defined]
        "--until", ui.UNTIL, "--agent", "support-agent"]).stdout_bytes
    assert downloaded == cli_output
    assert downloaded.startswith(b"week,agent,runs,")


def test_hostile_span_names_show_as_text(tmp_path_factory: pytest.TempPathFactory,
                                         page: object) -> None:
    db = ui.hostile_db(tmp_path_factory)
    app = ui.Dashboard(db, tmp_path_factory.mktemp("logs") / "hostile.log")
    try:
        result = CliRunner().invoke(cli, ["--db", db, "report", "runs", "--format", "json"])
        import json

        run_id = json.loads(result.output)[0]["run_id"]
        for path, charts in ((f"run?range=all&run={run_id}", 1), ("attribution?range=all", 2),
                             ("failures?range=all", 2), ("?range=all", 2)):
            page.goto(f"{app.url}/{path}")  # type: ignore[attr-defined]
            ui.settle(page, charts)
            body = page.locator("body").inner_text()  # type: ignore[attr-defined]
            if path.startswith("run"):
                assert ui.HOSTILE_IMG in body and ui.HOSTILE_LINK in body
                ui.shoot(page, "hostile-run")
            assert page.locator('img[src="x"]').count() == 0  # type: ignore[attr-defined]
            assert page.locator('a[href^="javascript"]').count() == 0  # type: ignore[attr-defined]
            assert page.locator("script:text('alert(2)')").count() == 0  # type: ignore[attr-defined]
            assert not page.dialogs, page.dialogs  # type: ignore[attr-defined]
    finally:
        app.stop()


def _long_runs_db(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A 60 s budget run that overran to 72.4 s, and a 10 min budget run."""
    from tests.support.trace_builder import TraceBuilder, open_db, store
    b = TraceBuilder(seed=7)
    minute = b.run(0, 72_400, 60_000)
    b.step(minute, "tool", "fetch_report", 0, 50_000)
    b.step(minute, "model", "gpt-4o", 50_000, 72_400)
    ten = b.run(0, 598_700, 600_000)
    b.step(ten, "tool", "crawl", 0, 598_700)
    con = open_db(tmp_path)
    store(con, b.finished())
    con.close()
    return str(tmp_path / "test.duckdb"), {"60s": b.trace_id(minute), "10m": b.trace_id(ten)}


def test_run_view_headline_numbers_are_never_cut(tmp_path: Path, page: object) -> None:
    """Regression: Budget and Elapsed showed "1 min …" on every run of 60 s or more."""
    db, runs = _long_runs_db(tmp_path)
    app = ui.Dashboard(db, tmp_path / "dashboard.log")
    try:
        for name, run_id in runs.items():
            page.goto(f"{app.url}/run?range=all&run={run_id}")  # type: ignore[attr-defined]
            ui.settle(page, 1)
            tiles = page.locator('[data-testid="stMetricValue"]')  # type: ignore[attr-defined]
            shown = {t.inner_text().strip() for t in tiles.all()}
            assert "…" not in "".join(shown)
            cut = tiles.evaluate_all(
                "tiles => tiles.flatMap(t => [t, ...t.querySelectorAll('*')])"
                ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)")
            assert cut == [], f"{name}: cut metric text {cut}"
            expected = {"60s": {"60.0 s", "1 min 12 s"}, "10m": {"10 min", "9 min 59 s"}}
            assert expected[name] <= shown, shown
            ui.shoot(page, f"run-{name}")
    finally:
        app.stop()


def test_a_click_on_a_culprit_bar_opens_its_runs(sample_app: ui.Dashboard,
                                                 page: object) -> None:
    """Clicking a bar opens the Runs page filtered to the runs behind it."""
    page.goto(f"{sample_app.url}/attribution?{QUERY}")  # type: ignore[attr-defined]
    ui.settle(page, PAGES["attribution"])
    chart = page.locator(".stPlotlyChart").first  # type: ignore[attr-defined]
    chart.locator(".barlayer .point path").last.click(force=True)
    page.wait_for_url("**/runs?**", timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(page)
    assert ui.heading(page) == "Runs"
    params = dict(parse_qsl(urlsplit(page.url).query))  # type: ignore[attr-defined]
    assert params["exhausted"] == "yes" and params["culprit"]
    assert params.get("since") == ui.SINCE, page.url  # type: ignore[attr-defined]
    result = CliRunner().invoke(cli, [
        "--db", sample_app.db, "report", "runs", "--since", ui.SINCE,  # type: ignore[attr-defined]
        "--until", ui.UNTIL, "--exhausted", "--culprit", params["culprit"],
        "--format", "json"])
    import json
    expected = len(json.loads(result.output))
    body = page.locator("body").inner_text()  # type: ignore[attr-defined]
    assert f"{expected:,} runs match" in body
    ui.shoot(page, "runs-from-culprit")
