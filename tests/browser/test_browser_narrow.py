"""Every page as a new user and on-call meet it, in Debian's Chromium at 900×800 and 1400×900,
in the light and the dark theme (the browser's colour scheme, which Streamlit follows):

- no headline number and no label of one is cut (at 900 px they read "38…" under "Culprit…",
  the run view's outcome "exhau…"): each metric's label and value fit their boxes;
- the sidebar starts collapsed at 900 px and open at 1400 px;
- the Runs page shows outcome, utilisation and who spent the most without a sideways scroll;
- every chart's lines and markers, as drawn, stand out at least 3:1 from the page (in dark mode
  the p99 line was 1.1:1);
- at 1400 px in the light theme, every page also as tests/support/page_fit.py checks it
  (on the page already loaded, laid out again in a 1400 × 1600 window): its charts drawn, every
  visible table fitting its box without a sideways scroll and showing no None or NaN (the run
  view's steps table with the columns on-call reads first), no dialog opened, and its shots
  page-<name>.png (page-run-exhausted.png, page-compare-exhausted.png for the run view and the
  comparison of the sample's first exhausted run) and, for fit.TALL_SHOTS, <name>.png at
  1400 × 3200; the failed run's view and comparison are checked so in
  tests/browser/test_browser_pages_fit.py;
- clicking a waterfall bar opens that step's details;
- What if's whole policy is in its address, follows its sliders and opens again from a link;
  its sliders' accessible names are the step keys as they are;
- the Cost page's choice of budget is in its address, and its download is the CLI's bytes; a
  dollar-exhausted run's cumulative spend draws its budget and stars the crossing call (at
  1400 px in the light theme only: the four sizes and themes above cover both pages' tiles and
  lines).

Each page is also shot into test-artifacts/screenshots/<page>-<width>-<theme>.png. One test
checks a page at one size in both themes: loaded in the light one (in conftest.py's tab, whose
HTTP cache carries over but no storage does: each load meets the page as a new visitor), then
switched to the dark one in place. A page is loaded once at 1400 px for all of the above: a
Streamlit page load costs Chromium ~4 core-seconds. Every wait is on a condition (the page
drawn, an address, a text), never a fixed sleep."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from dashboard import colors
from tests.support import page_fit as fit
from tests.support import ui

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not ui.CHROMIUM.exists(), reason="needs Debian's chromium")

SIZES = {"900": (900, 800), "1400": (1400, 900)}
THEMES = ("light", "dark")
TIMEOUT_MS = 120_000
# name -> (address after the host, Plotly charts the page draws once it has finished)
PAGES = {"overview": ("/?{q}", 3), "runs": ("/runs?{q}", 0),
         "attribution": ("/attribution?{q}", 3), "cost": ("/cost?{q}", 3),
         "failures": ("/failures?{q}", 3),
         "utilisation": ("/utilisation?{q}", 3), "reconciliation": ("/reconciliation?{q}", 2),
         "weekly": ("/weekly?{q}", 0), "simulate": ("/simulate?{q}", 2),
         "budgets": ("/budgets?{q}", 0), "run": ("/run?{q}&run={run}", 2),
         "compare": ("/compare?{q}&run={run}", 1)}


@pytest.fixture(scope="module")
def run_id(sample_app: ui.Dashboard) -> str:
    return ui.exhausted_run(sample_app.db)  # type: ignore[attr-defined]


def visit(tab: object, url: str, size: str, theme: str) -> str:
    """Open `url` in `tab` at one of the two sizes in one of the two themes (the browser's
    colour scheme, set before the page loads, as a user's system has it), and the view's name
    (900-dark…)."""
    width, height = SIZES[size]
    tab.set_viewport_size({"width": width, "height": height})  # type: ignore[attr-defined]
    tab.emulate_media(color_scheme=theme)  # type: ignore[attr-defined]
    tab.goto(url)  # type: ignore[attr-defined]
    return f"{size}-{theme}"


# Whether the page and every chart on it are drawn in the theme the browser's colour scheme
# asks for (arg: true for dark): the page's background on the dark or the light side, and each
# chart's paper the page's background (Streamlit redraws its charts in the new theme).
_IN_THEME = """(dark) => {
    const rgb = getComputedStyle(document.querySelector('[data-testid=stApp]'))
        .backgroundColor.match(/[\\d.]+/g).slice(0, 3).map(Number);
    const hex = '#' + rgb.map(v => v.toString(16).padStart(2, '0')).join('').toUpperCase();
    return (rgb[0] + rgb[1] + rgb[2] < 384) === dark
        && [...document.querySelectorAll('.js-plotly-plot')].every(c =>
            (c._fullLayout?.paper_bgcolor || '').toUpperCase() === hex);
}"""
# The traces that take their colour from the theme's colour cycle rather than from the app
# (dashboard/colors.py): none may, since Streamlit keeps the cycle of the theme a page loaded
# in when the colour scheme changes under it (measured: after a switch to dark, the charts'
# colorway stayed the light theme's; every mark drawn, the page and the tiles were as in a page
# loaded in the dark theme, on all twelve pages).
_CYCLE_COLOURED = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(c => c.data
    .filter(t => t.visible !== false && !t.colorscale && !t.coloraxis && !t.fillcolor
                 && !(t.marker && (t.marker.color || t.marker.colorscale))
                 && !(t.line && t.line.color))
    .map(t => [c.querySelector('.gtitle')?.textContent || '', t.type, t.name || '']))"""


def switch_theme(tab: object, size: str, theme: str) -> str:
    """The page open in `tab`, back at one of the two sizes, switched to `theme` in place (the
    browser's colour scheme changed under it), and the view's name: waits until the page and
    its charts are drawn in it."""
    width, height = SIZES[size]
    tab.set_viewport_size({"width": width, "height": height})  # type: ignore[attr-defined]
    tab.wait_for_function("(h) => window.innerHeight === h", arg=height,  # type: ignore[attr-defined]
                          timeout=TIMEOUT_MS)
    tab.emulate_media(color_scheme=theme)  # type: ignore[attr-defined]
    tab.wait_for_function(_IN_THEME, arg=theme == "dark", timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    return f"{size}-{theme}"


# The views of the tests that use a page (a click, a slider): each size once and each theme
# once. What they check does not depend on the pair (the theme changes no widget and no bar's
# place), and test_no_number_is_cut_and_every_mark_stands_out draws every page at each size in
# both themes; the other two pairs cost the browser lane four page loads (~20 s on 2 cores).
VIEWS = [("900", "dark"), ("1400", "light")]


def address(app: ui.Dashboard, page: str, run: str) -> str:
    path, _ = PAGES[page]
    return app.url + path.format(q=ui.QUERY, run=run)


def drawn(tab: object, charts: int = 0) -> None:
    """The page's script run is over, nothing is a skeleton, `charts` charts are drawn and no
    exception shows (ui.settle: conditions only)."""
    ui.settle(tab, charts, timeout_ms=TIMEOUT_MS)


# Each metric's label and value against their boxes: a text cut with an ellipsis is wider than
# the box that shows it (scrollWidth > clientWidth) in some element of it.
_CUT_METRICS = """() => [...document.querySelectorAll('[data-testid=stMetric]')]
    .filter(m => m.offsetParent !== null)
    .flatMap(m => ['stMetricLabel', 'stMetricValue'].map(part => {
        const box = m.querySelector(`[data-testid=${part}]`);
        const cut = box && [box, ...box.querySelectorAll('*')]
            .filter(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0);
        return {part, text: box ? box.innerText : '', cut: cut ? cut.length : 0,
                right: box ? box.getBoundingClientRect().right : 0};
    }))"""

# Every stroke and marker colour Plotly drew, as the browser computed it, with the page's
# background: the scatter lines and points, the shapes (vertical and horizontal lines).
_CHART_MARKS = """() => {
    const page = getComputedStyle(document.querySelector('[data-testid=stApp]'))
        .backgroundColor;
    const marks = [];
    for (const chart of document.querySelectorAll('.js-plotly-plot')) {
        const title = chart.querySelector('.gtitle')?.textContent || '';
        for (const e of chart.querySelectorAll('.scatterlayer .js-line, .shapelayer path')) {
            const s = getComputedStyle(e);
            if (s.stroke && s.stroke !== 'none' && parseFloat(s.strokeOpacity || 1) > 0)
                marks.push([title, 'line', s.stroke]);
        }
        for (const e of chart.querySelectorAll('.scatterlayer .point')) {
            // a marker stands out by its fill or by its outline (a heatmap's cell is filled
            // from a colour scale, and outlined)
            const s = getComputedStyle(e);
            const paints = [s.fill, parseFloat(s.strokeWidth) > 0 ? s.stroke : 'none']
                .filter(p => p && p !== 'none' && !p.includes('url'));
            if (paints.length) marks.push([title, 'marker', paints.join(' | ')]);
        }
    }
    return {page, marks};
}"""


def _hex(css: str) -> str:
    values = [int(float(v)) for v in re.findall(r"[\d.]+", css)[:3]]
    return "#" + "".join(f"{v:02X}" for v in values)


@pytest.mark.parametrize("page_name", list(PAGES))
@pytest.mark.parametrize("size", list(SIZES))
def test_no_number_is_cut_and_every_mark_stands_out(sample_app: ui.Dashboard, run_id: str,
                                                    page: object, size: str,
                                                    page_name: str) -> None:
    """One page at one size, loaded in the light theme, then switched to the dark one in place
    (as a page loaded in it draws, as long as no trace takes its colour from the theme's cycle:
    asserted); at 1400 px in the light theme, also fit.check's tables, charts and shots."""
    charts = PAGES[page_name][1]
    for theme in THEMES:
        if theme == THEMES[0]:
            name = visit(page, address(sample_app, page_name, run_id), size, theme)
        else:
            name = switch_theme(page, size, theme)
        drawn(page, charts)
        assert page.evaluate(_CYCLE_COLOURED) == [], page_name  # type: ignore[attr-defined]
        _check_view(page, page_name, name)
        _shoot(page, f"{page_name}-{name}")
        if name == "1400-light" and page_name in fit.AT_1400:
            # What tests/support/page_fit.py checks at 1400 px, on this load rather than one of its
            # own; switch_theme brings the window back to 1400 × 900 before the dark pass.
            fit.check(page, fit.AT_1400[page_name], charts)


def _check_view(tab: object, page: str, name: str) -> None:
    width = tab.viewport_size["width"]  # type: ignore[attr-defined]
    shown = tab.evaluate(_CUT_METRICS)  # type: ignore[attr-defined]
    if page not in ("runs", "weekly", "compare", "utilisation"):
        assert shown, f"{page}: no headline numbers"
    for part in shown:
        assert part["cut"] == 0, f"{page} at {name}: {part['part']} {part['text']!r} is cut"
        assert part["right"] <= width, f"{page} at {name}: {part['text']!r} off the page"
    sidebar = tab.evaluate(  # type: ignore[attr-defined]
        "document.querySelector('[data-testid=stSidebar]').getBoundingClientRect().width")
    assert (sidebar == 0) == (width < 1100), f"{page} at {name}: sidebar {sidebar} px wide"
    drawn_marks = tab.evaluate(_CHART_MARKS)  # type: ignore[attr-defined]
    background = _hex(drawn_marks["page"])
    assert (colors.luminance(background) < 0.1) == name.endswith("dark"), background
    for title, what, colour in drawn_marks["marks"]:
        ratio = max(colors.contrast(_hex(paint), background) for paint in colour.split(" | "))
        assert ratio >= colors.LEAST_CONTRAST, (
            f"{page} at {name}: {title}: a {what} in {colour} is {ratio:.2f}:1 on "
            f"{background}")
    if page == "runs":
        # what on-call reads first, without a sideways scroll (the grid's header cells are
        # drawn a moment after the page: waited for)
        tab.wait_for_function(  # type: ignore[attr-defined]
            "() => document.querySelectorAll('.st-key-runs_table [role=columnheader]').length",
            timeout=TIMEOUT_MS)
        grid = tab.evaluate("""() => {
            const t = document.querySelector('.st-key-runs_table');
            const s = t.querySelector('.dvn-scroller');
            return {scroll: s.scrollWidth, box: s.clientWidth,
                    heads: [...t.querySelectorAll('[role=columnheader]')]
                        .map(h => h.textContent)};
        }""")  # type: ignore[attr-defined]
        assert {"outcome", "utilisation", "spent the most"} <= set(grid["heads"])
        assert grid["scroll"] <= grid["box"] + 1, f"runs at {name}: {grid}"


def _shoot(tab: object, name: str) -> None:
    """The whole page: the window made as tall as the page first (Streamlit scrolls an inner
    container, so a full-page shot only holds what fits the window), then back."""
    width = tab.viewport_size["width"]  # type: ignore[attr-defined]
    tall = min(max(ui.page_height(tab) + 120, 800), 16_000)
    tab.set_viewport_size({"width": width, "height": tall})  # type: ignore[attr-defined]
    tab.wait_for_function(ui.PAGE_DRAWN, arg=0, timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ui.SHOTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("size", "theme"), VIEWS, ids=[f"{s}-{t}" for s, t in VIEWS])
def test_clicking_a_waterfall_bar_opens_that_steps_details(sample_app: ui.Dashboard,
                                                          run_id: str, page: object,
                                                          size: str, theme: str) -> None:
    tab = page
    name = visit(tab, address(sample_app, "run", run_id), size, theme)
    drawn(tab, 1)
    picker = tab.get_by_role("combobox", name="Step", exact=True)  # type: ignore[attr-defined]
    first = picker.input_value()  # "#9 tool:fetch_report · client_timeout"
    bars = tab.locator(".js-plotly-plot .barlayer .point path")  # type: ignore[attr-defined]
    for i in range(bars.count()):
        bar = bars.nth(i)
        box = bar.bounding_box()
        if not box or box["width"] < 4:
            continue
        label = _row_label(tab, box)
        if label and not first.startswith(label.split(" ", 1)[0] + " "):
            break
    else:
        pytest.fail(f"no bar of another step than the one shown ({first}) to click")
    bar.click(force=True)
    number = label.split(" ", 1)[0]
    tab.wait_for_function(  # type: ignore[attr-defined]
        "(n) => document.querySelector('input[aria-label=Step]').value.startsWith(n + ' ')",
        arg=number, timeout=TIMEOUT_MS)
    drawn(tab, 1)
    assert picker.input_value().startswith(label), (name, label, picker.input_value())


def _row_label(tab: object, box: dict) -> str:
    """The waterfall's row name level with a bar (its y tick), e.g. `#3 tool:fetch_report`."""
    middle = box["y"] + box["height"] / 2
    return tab.evaluate("""(y) => {  // the y tick whose middle is nearest the bar's
        let best = null, distance = 1e9;
        for (const t of document.querySelectorAll('.js-plotly-plot .ytick text')) {
            const r = t.getBoundingClientRect(), d = Math.abs(r.top + r.height / 2 - y);
            if (d < distance) { best = t; distance = d; }
        }
        return best ? best.textContent.replace(/^[\\s└]+/, '') : '';
    }""", middle)  # type: ignore[attr-defined]


def _policy(tab: object) -> str:
    return tab.locator('[data-testid="stCaptionContainer"]').filter(  # type: ignore[attr-defined]
        has_text="Policy:").first.inner_text()


@pytest.mark.parametrize(("size", "theme"), VIEWS, ids=[f"{s}-{t}" for s, t in VIEWS])
def test_what_ifs_policy_is_in_its_address_and_opens_again(sample_app: ui.Dashboard,
                                                           page: object,
                                                           size: str, theme: str) -> None:
    tab = page
    link = (f"{sample_app.url}/simulate?{ui.QUERY}&cap=model:gpt-4o-mini=10000"
            "&cap=queue:handoff_queue=8000&deadline=45000&retries=off")
    name = visit(tab, link, size, theme)
    drawn(tab, 2)
    policy = ("caps: model:gpt-4o-mini=10.0 s, queue:handoff_queue=8.0 s; deadline: 45.0 s; "
              "min start: as recorded; retries: off")
    assert policy in _policy(tab), _policy(tab)
    # the sliders' accessible names are the keys as they are, not Markdown source
    names = tab.evaluate(  # type: ignore[attr-defined]
        "[...document.querySelectorAll('input[type=range]')].map(e => e.ariaLabel)")
    assert {"model:gpt-4o-mini", "tool:fetch_report", "queue:handoff_queue"} <= set(names)
    assert not [n for n in names if "\\" in n], names
    slider = tab.locator('input[type=range][aria-label="tool:fetch_report"]')  # type: ignore[attr-defined]
    before = float(slider.input_value())
    slider.focus()
    slider.press("ArrowLeft")
    moved = f"tool:fetch_report={round((before - 0.1) * 1000)}"
    tab.wait_for_function("(c) => decodeURIComponent(location.search).includes(c)",  # type: ignore[attr-defined]
                          arg=moved, timeout=TIMEOUT_MS)
    drawn(tab, 2)
    written = tab.url  # type: ignore[attr-defined]
    caps = parse_qs(urlsplit(written).query)["cap"]
    assert sorted(caps) == sorted(["model:gpt-4o-mini=10000", "queue:handoff_queue=8000",
                                   moved])
    shown = _policy(tab)
    # the copy-link affordance holds the same address
    tab.get_by_role("button", name=re.compile("Link to this scenario")).click()  # type: ignore[attr-defined]
    copied = tab.locator('[data-testid="stPopoverBody"] code, [data-testid="stCode"] code')  # type: ignore[attr-defined]
    copied.first.wait_for(timeout=TIMEOUT_MS)
    text = copied.first.inner_text()
    assert parse_qs(urlsplit(text).query) == parse_qs(urlsplit(written).query), (text, written)
    # the address alone, in a new tab (a Streamlit session of its own, and no storage or
    # cookie carried over: conftest.py), opens exactly this scenario
    fresh = tab.context.new_page()  # type: ignore[attr-defined]
    try:
        fresh.set_viewport_size(tab.viewport_size)  # type: ignore[attr-defined]
        fresh.goto(text)
        drawn(fresh, 2)
        assert _policy(fresh) == shown, (name, _policy(fresh), shown)
    finally:
        fresh.close()


def _culprit_is_not_the_crosser(db: str) -> str:
    """A dollar-exhausted run of the sample's two weeks whose crossing call is not in the step
    that spent the most (docs/metrics.md §11.6's worked case)."""
    from click.testing import CliRunner

    from budgetscope.cli import cli
    result = CliRunner().invoke(cli, ["--db", db, "report", "cost", "--since", ui.SINCE,
                                      "--until", ui.UNTIL, "--format", "json"])
    assert result.exit_code == 0, result.output
    return next(r["run_id"] for r in json.loads(result.output)
                if r["usd_exhausted"] and r["cost_crosser"]
                and r["cost_crosser"] != r["cost_culprit"])


def test_the_cost_page_and_a_runs_cumulative_spend(sample_app: ui.Dashboard,
                                                   page: object) -> None:
    """The Cost page: its choice of budget written to the address, the address opening it
    again, the attribution download the CLI's bytes; then the run view of a run whose crosser
    is not its culprit: the cost block's words, the cumulative spend with the dollar budget and
    the crossing call starred. Shot: cost-tokens-1400-light.png, run-cost-1400-light.png."""
    from click.testing import CliRunner

    from budgetscope.cli import cli
    tab = page
    tab.set_viewport_size({"width": 1400, "height": 900})  # type: ignore[attr-defined]
    tab.goto(address(sample_app, "cost", ""))  # type: ignore[attr-defined]
    drawn(tab, 3)
    tab.get_by_role("radio", name="tokens", exact=True).click()  # type: ignore[attr-defined]
    tab.wait_for_function("() => location.search.includes('dimension=tokens')",  # type: ignore[attr-defined]
                          timeout=TIMEOUT_MS)
    drawn(tab, 2)
    titles = tab.evaluate(  # type: ignore[attr-defined]
        "[...document.querySelectorAll('.js-plotly-plot .gtitle')].map(t => t.textContent)")
    assert "Token utilisation histogram" in titles, titles
    with tab.expect_download(timeout=TIMEOUT_MS) as download:  # type: ignore[attr-defined]
        tab.get_by_role("button", name="Download CSV").first.click()  # type: ignore[attr-defined]
    downloaded = Path(download.value.path()).read_bytes()
    cli_bytes = CliRunner().invoke(cli, [
        "--db", sample_app.db, "report", "cost-attribution", "--dimension", "tokens",  # type: ignore[attr-defined]
        "--since", ui.SINCE, "--until", ui.UNTIL]).stdout_bytes
    assert downloaded == cli_bytes and downloaded.startswith(b"step_key,budget_share,")
    link = tab.url  # type: ignore[attr-defined]
    _shoot(tab, "cost-tokens-1400-light")
    fresh = tab.context.new_page()  # type: ignore[attr-defined]
    fresh.goto(link)
    drawn(fresh, 2)
    assert fresh.get_by_text("Token-exhausted runs", exact=True).count() == 1
    fresh.close()

    run_id = _culprit_is_not_the_crosser(sample_app.db)  # type: ignore[attr-defined]
    tab.set_viewport_size({"width": 1400, "height": 900})  # type: ignore[attr-defined]
    tab.goto(address(sample_app, "run", run_id))  # type: ignore[attr-defined]
    drawn(tab, 2)
    block = tab.locator(".st-key-run_cost_block").inner_text()  # type: ignore[attr-defined]
    assert "Cost culprit:" in block and "Crosser:" in block and "dollar-exhausted" in block
    spend = tab.evaluate("""() => {
        const chart = [...document.querySelectorAll('.js-plotly-plot')].find(c =>
            (c.querySelector('.gtitle')?.textContent || '').startsWith('Cumulative spend'));
        if (!chart) return null;
        return {lines: chart.querySelectorAll('.shapelayer path').length,
                notes: [...chart.querySelectorAll('.annotation-text')].map(a => a.textContent),
                box: chart.getBoundingClientRect().width};
    }""")  # type: ignore[attr-defined]
    assert spend is not None, "no cumulative spend chart"
    assert spend["lines"] >= 1  # the dollar budget
    assert any(n.startswith("crossed by #") for n in spend["notes"]), spend["notes"]
    assert any(n.startswith("dollar budget $") for n in spend["notes"]), spend["notes"]
    assert any(n.startswith("cost culprit #") for n in spend["notes"]), spend["notes"]
    _shoot(tab, "run-cost-1400-light")
