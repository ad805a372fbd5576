"""What a page must be at 1400 px, checked on a page already open in a tab: its charts drawn,
every visible table fitting its box without a sideways scroll and showing no program's word for
"no value" (None, NaN…), no dialog opened, and the page shot whole into
test-artifacts/screenshots/ (page-<shot>.png in a window as tall as the page, and <name>.png in
a 1400 × 3200 one for the pages of TALL_SHOTS).

Shared by the two modules that need it so that a page is loaded once for all its checks at
1400 px (a Streamlit page load costs Chromium ~4 core-seconds): test_browser_narrow.py checks
the pages it loads at 1400 × 900 in the light theme (every page of `AT_1400`, the exhausted run's
view and comparison among them) before it switches them to dark; test_browser_pages_fit.py
loads only what Narrow does not, the failed run's view and comparison."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support import ui

WIDTH = 1400
# The window the checks run in (a page is laid out again in it first): tall enough that the
# tables of the top of every page are in it, as in the window the pages were first checked in.
HEIGHT = 1600
TIMEOUT_MS = 120_000
# Cell texts that are a program's words for "no value", never a person's.
NOT_A_VALUE = {"None", "nan", "NaN", "NaT", "null", "<NA>"}
# The run view's steps table: the columns on-call reads first, none behind a horizontal scroll.
STEPS_COLUMNS = frozenset({"step", "class", "role", "duration", "share", "utilisation"})


@dataclass(frozen=True)
class Fit:
    """What one page is checked for at 1400 px. `label` names it in failure messages, `shot`
    is its whole-page shot's name; `tall` adds a 1400 × 3200 shot as <name>.png."""

    label: str
    shot: str
    needs_a_table: bool = True
    tall: bool = False
    headers: frozenset[str] = frozenset()


def run_view(kind: str) -> Fit:
    """A run's view (`kind`: failed, exhausted): its steps table with STEPS_COLUMNS."""
    return Fit(f"run-{kind}", f"page-run-{kind}", needs_a_table=False, headers=STEPS_COLUMNS)


def comparison(kind: str) -> Fit:
    """The comparison page of a run (`kind`: failed, exhausted)."""
    return Fit(f"compare-{kind}", f"page-compare-{kind}", needs_a_table=False)


def _page(name: str, tall: bool = True, needs_a_table: bool = True) -> Fit:
    return Fit(name, f"page-{name}", needs_a_table=needs_a_table, tall=tall)


# test_browser_narrow.py's page name -> what the page is checked for at 1400 px ("run" and
# "compare" are those of the sample's first exhausted run, ui.exhausted_run).
AT_1400 = {"overview": _page("overview"), "runs": _page("runs", tall=False),
           "attribution": _page("attribution"), "cost": _page("cost"),
           "failures": _page("failures"),
           "utilisation": _page("utilisation"), "reconciliation": _page("reconciliation"),
           "weekly": _page("weekly"), "simulate": _page("simulate"),
           "budgets": _page("budgets", tall=False, needs_a_table=False),
           "run": run_view("exhausted"), "compare": comparison("exhausted")}
# The pages also shot in a 1400 × 3200 window, as <name>.png.
TALL_SHOTS = tuple(fit.label for fit in AT_1400.values() if fit.tall)


def check(tab: object, fit: Fit, charts: int) -> None:
    """The page open in `tab`, drawn with `charts` charts, checked and shot as `fit` says, in a
    1400 × 1600 window and then in taller ones (the window is left at the last: a caller that
    goes on at another size sets it)."""
    tab.set_viewport_size({"width": WIDTH, "height": HEIGHT})  # type: ignore[attr-defined]
    tab.wait_for_function("(h) => window.innerHeight === h", arg=HEIGHT, timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(tab, charts, timeout_ms=TIMEOUT_MS)
    if fit.headers:
        # The grid fills its accessible copy (the headers tables() reads) after the run is over.
        tab.wait_for_function(  # type: ignore[attr-defined]
            "(wanted) => [...document.querySelectorAll('[data-testid=stDataFrame]')].some(t => "
            "{ const h = new Set([...t.querySelectorAll('[role=columnheader]')]"
            ".map(e => e.textContent)); return wanted.every(w => h.has(w)); })",
            arg=sorted(fit.headers), timeout=TIMEOUT_MS)
    assert tab.locator(".js-plotly-plot").count() >= charts, fit.label  # type: ignore[attr-defined]
    shown = check_tables(tab, fit.label)
    if fit.needs_a_table:
        assert shown, f"{fit.label}: no table drawn"
    if fit.headers:
        assert any(fit.headers <= set(t["headers"]) for t in shown), (  # type: ignore[arg-type]
            f"{fit.label}: no table with {sorted(fit.headers)}")
    shoot_whole(tab, fit.shot, charts)
    if fit.tall:
        shoot_whole(tab, fit.label, charts, tall=3200)
    assert not tab.dialogs, tab.dialogs  # type: ignore[attr-defined]


def shoot_whole(tab: object, name: str, charts: int = 0, tall: int | None = None) -> None:
    """The whole page: Streamlit scrolls an inner container, so the window is made as tall as
    the page before the shot (a full-page shot only holds what fits the window), or `tall`
    px high."""
    if tall is None:
        tall = min(max(ui.page_height(tab) + 120, HEIGHT), 16_000)
    tab.set_viewport_size({"width": WIDTH, "height": tall})  # type: ignore[attr-defined]
    # Laid out again at the new size: the window has it, the page is still drawn with its
    # charts, and two frames have been painted since (a resize lays out in the next frame).
    tab.wait_for_function("(h) => window.innerHeight === h", arg=tall, timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(tab, charts, timeout_ms=TIMEOUT_MS)
    tab.evaluate("() => new Promise(done => requestAnimationFrame("  # type: ignore[attr-defined]
                 "() => requestAnimationFrame(done)))")
    ui.SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ui.SHOTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


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
    """Every visible table fits its box (no column cut on the right) and shows no NOT_A_VALUE;
    the tables, as tables() reads them."""
    shown = tables(tab)
    for table in shown:
        assert table["scroll"] <= table["box"] + 1, (  # type: ignore[operator]
            f"{name}: table {table['key']} is {table['scroll']} px wide in a {table['box']} px "
            f"box: its right columns are cut ({table['headers']})")
        bad = sorted(set(table["cells"]) & NOT_A_VALUE)  # type: ignore[arg-type]
        assert not bad, f"{name}: table {table['key']} shows {bad}"
    return shown
