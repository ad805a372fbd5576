"""What each kind of element costs a dashboard page's first visit, against the floor.

    .venv/bin/python bench/bench_page_elements.py --db PATH [--pages attribution,runs] [--repeat 6]

bench_dashboard.py gives each page's first visit as a ratio of the floor (a bare Streamlit page
with as many trivial Plotly charts). This splits that ratio: the same page is served as shipped
and with kinds of element left out (bench/muted_app.py: tables; metrics; text; the widgets and
the sidebar's navigation; all of these, which leaves the title and the charts). A left-out
widget returns what it would have held, so every variant runs the same queries and draws the
same charts from the same data; what a variant saves is what drawing those elements costs.

Each page is timed as bench_dashboard.py times it (navigation to the page drawn with every
chart, a fresh browser context), on the data's last week (its dates in the URL, as
bench_dashboard's "last 7 days"). Before every timed visit the database file's mtime is moved so
that the dashboard's cache misses (it keys on the file's state): each visit is a first visit on
the server too. One untimed visit per server and page first, so that no variant pays for
importing the page's Python. The variants and the floor are visited in turn, the order reversed
every round, --repeat rounds; the figure is the median, the ratio against the floor's median
in the same rounds. The floor furnished with a dashboard page's elements (bench_browser_floor.py)
is visited in the same rounds and given the same way: what those elements cost with no
budgetscope code behind them. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_dashboard import ARGS, PAGE_CHARTS, describe, time_visit, url_for  # noqa: E402
from tests.browser.support import Dashboard  # noqa: E402

MUTED_APP = ROOT / "bench" / "muted_app.py"
ALL_BUT_CHARTS = "tables+metrics+text+widgets+nav"
# BENCH_MUTE of each variant ("" is the dashboard as shipped), and its column heading.
VARIANTS = {"": "as shipped", "tables": "no tables", "metrics": "no metrics",
            "text": "no text", "widgets+nav": "no widgets, no nav",
            ALL_BUT_CHARTS: "title and charts only"}


# Error boxes a page shows: a variant that fails part-way would be timed drawing less.
_ERRORS = ("() => [...document.querySelectorAll('[data-testid=stException], "
           "[data-testid=stAlertContentError]')].map(box => box.innerText.slice(0, 300))")


def visit(browser: object, url: str, charts: int, check: bool = False) -> float:
    """One first visit, timed; with `check`, a page showing an error stops the benchmark."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})  # type: ignore
    try:
        tab = context.new_page()
        seconds = time_visit(tab, url, charts)
        errors = tab.evaluate(_ERRORS) if check else []
        if errors:
            raise RuntimeError(f"{url} shows {errors}")
        return seconds
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True,
                        help="a database to read (bench_dashboard.py --runs N builds one); "
                             "its mtime is moved before every visit")
    parser.add_argument("--pages", default=",".join(PAGE_CHARTS),
                        help="comma-separated, of: " + ", ".join(PAGE_CHARTS))
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--mute", action="append", metavar="KINDS",
                        help="instead of the default variants, these (repeatable): kinds "
                             "joined by '+', of: tables, metrics, text, widgets, nav")
    options = parser.parse_args()
    variants = ({"": VARIANTS[""], **{mute: f"no {mute}" for mute in options.mute}}
                if options.mute else VARIANTS)
    pages = [page for page in options.pages.split(",") if page]
    unknown = set(pages) - PAGE_CHARTS.keys()
    if unknown:
        parser.error(f"unknown pages {sorted(unknown)}")
    from playwright.sync_api import sync_playwright

    from bench.bench_browser_floor import FloorApp

    week, run_id = describe(options.db)
    servers: dict[str, Dashboard] = {}
    floor = FloorApp()
    try:
        for index, mute in enumerate(variants):
            servers[mute] = Dashboard(str(options.db), Path("/tmp") / f"bench-elements-{index}.log",
                                      app=MUTED_APP if mute else None, env={"BENCH_MUTE": mute})
        print(f"first visit (s, median of {options.repeat}) / the floor's in the same rounds, "
              "with kinds of element left out; headless Chromium 1400x2400")
        print(f"  {'page':<15}{'floor':>8}"
              + "".join(f"{label:>24}" for label in ["furnished floor", *variants.values()]))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            for page in pages:
                charts = PAGE_CHARTS[page]
                urls = {mute: server.url + url_for(page, week, run_id)
                        for mute, server in servers.items()}
                urls["floor"] = floor.url(charts)
                urls["furnished floor"] = floor.url(charts, furnished=True)
                for url in urls.values():
                    visit(browser, url, charts, check=True)
                times: dict[str, list[float]] = {name: [] for name in urls}
                for round_ in range(options.repeat):
                    for name in (list(urls) if round_ % 2 == 0 else list(urls)[::-1]):
                        os.utime(options.db)
                        times[name].append(visit(browser, urls[name], charts))
                base = statistics.median(times["floor"])
                cells = [f"{statistics.median(times[name]) / base:.2f}x "
                         f"({statistics.median(times[name]):.2f} s)"
                         for name in ["furnished floor", *variants]]
                print(f"  {page:<15}{base:>6.2f} s" + "".join(f"{cell:>24}" for cell in cells),
                      flush=True)
            browser.close()
    finally:
        for server in servers.values():
            server.stop()
        floor.stop()


if __name__ == "__main__":
    main()
