"""Benchmark of the dashboard on a large database: each page's queries, and each page drawn in
headless Chromium.

    .venv/bin/python -m bench.bench_dashboard --db PATH           # an existing database
    .venv/bin/python -m bench.bench_dashboard --runs 35000        # generate + ingest first
    .venv/bin/python -m bench.bench_dashboard --db PATH --against DIR [--rounds 5] [--pages …]

With --runs, `runs<N>.pb` is generated with the sample generator and loaded with
`budgetscope ingest` into --workdir (both skipped when the files exist; ~35k runs ≈ 1M spans).
Then, for two filters (the data's last 7 days, and all time):
- queries: per page, the `queries` calls that page makes (dashboard/data.py's reports, without
  its cache), including the read-only open and close of the file per batch; cold (first call
  of that batch) and warm (median of --repeat);
- browser: `budgetscope dashboard` as a subprocess, each page opened by URL in headless
  Chromium, timed from navigation to the page drawn (script finished, no skeleton left) with
  all its Plotly charts; first visit in a fresh browser context (no cached JavaScript,
  Streamlit cache cold for that filter) and revisits in the same context (median of --repeat).
  Each first visit is also given against two floors measured beside it (FloorApp, floor_app.py:
  Streamlit pages with as many trivial Plotly charts): the bare floor (a title and the charts),
  and the floor furnished with a dashboard page's elements.
- with --against DIR (another checkout of budgetscope, e.g. `git archive COMMIT | tar -x -C
  DIR`, run with this environment's packages), the browser part is instead each page's first
  visit on DIR's dashboard and on this one, served side by side on the same database, beside
  the two floors: all four visited in turn (the order reversed every round), --rounds rounds,
  over the last 7 days (with --all-time, over all time), the file's mtime moved before every
  visit so that each is a first visit on the server too (the dashboard's cache keys on the
  file's state). Medians and [min-max] of each, and this checkout's median over DIR's.
Figures, never assertions: the target is every page's queries < 1 s and drawn < 3 s on ~1M
spans.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.support.browser import PAGE_DRAWN, Dashboard, free_port, wait_until_served
from queries import reports
from queries.filters import Filters
from queries.run_view import load_run
from store import connect

ROOT = Path(__file__).resolve().parent.parent

PYTHON = sys.executable
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# What each page asks `queries` for (see dashboard/app_pages/*.py); every page also reads the
# all-time runs for the sidebar (database status and agent list).
PAGE_QUERIES: dict[str, list[str]] = {
    "overview": ["runs", "failures", "reconciliation", "attribution",
                 "prev:runs", "prev:failures", "prev:reconciliation"],
    "attribution": ["runs", "attribution_summary", "attribution"],
    "failures": ["runs", "failures", "weekly", "step_utilisation"],
    "utilisation": ["runs", "utilisation", "utilisation_histogram", "step_utilisation"],
    "reconciliation": ["runs", "reconciliation", "reconciliation_by_period"],
    "run": ["run_view"],
    "weekly": ["weekly"],
}
# Every page, in the sidebar's order, with the Plotly charts it draws (counted in Chromium on
# the 35k-run database: a page is timed until that many have drawn).
PAGE_CHARTS = {"overview": 3, "attribution": 3, "failures": 3, "utilisation": 3,
               "reconciliation": 2, "runs": 0, "run": 1, "compare": 1, "weekly": 0,
               "simulate": 2, "budgets": 0}


FLOOR_APP = Path(__file__).with_name("floor_app.py")
FLOOR_SAMPLES = 3  # first visits of each floor per dashboard page


class FloorApp:
    """`streamlit run floor_app.py` on a free port: the floors a page's first visit is given
    against (bare: a title and `charts` trivial Plotly charts; furnished: the same charts among
    a dashboard page's sidebar, widgets, metrics and tables, with constant data)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.server = subprocess.Popen(
            [PYTHON, "-m", "streamlit", "run", str(FLOOR_APP), "--server.port",
             str(self.port), "--server.address", "127.0.0.1", "--server.headless", "true",
             "--browser.gatherUsageStats", "false"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_until_served(f"http://127.0.0.1:{self.port}", self.server, 60):
            self.stop()
            raise RuntimeError("streamlit did not start")

    def url(self, charts: int, furnished: bool = False, page: str = "") -> str:
        """The bare floor, or furnished: with What if's own elements for `page` "simulate",
        with Attribution's for any other."""
        furnish = "simulate" if page == "simulate" else "1"
        return f"http://127.0.0.1:{self.port}/?n={charts}" + (
            f"&furnish={furnish}" if furnished else "")

    def stop(self) -> None:
        self.server.terminate()
        try:
            self.server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


def build(workdir: Path, runs: int) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    traces, db = workdir / f"runs{runs}.pb", workdir / f"dash{runs}.duckdb"
    if not traces.exists():
        print(f"generating {traces}…", flush=True)
        subprocess.run([PYTHON, "-m", "sample_traces.generate", "--runs", str(runs),
                        "--format", "pb-stream", "--out", str(traces)], cwd=ROOT, check=True)
    if not db.exists():
        print(f"ingesting into {db}…", flush=True)
        subprocess.run([PYTHON, "-c", "from budgetscope.cli import main; main()", "--db",
                        str(db), "ingest", "--no-progress", str(traces)], cwd=ROOT, check=True)
    return db


def describe(db: Path) -> tuple[Filters, str]:
    """The data's last 7 days as a filter, and an exhausted run id to open."""
    con = connect(db, read_only=True)
    try:
        spans = con.execute("SELECT count(*) FROM spans").fetchone()[0]
        runs = reports.runs(con, Filters())
    finally:
        con.close()
    last = dt.datetime.fromisoformat(runs["start"].max().replace("Z", "+00:00"))
    until = (last + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    week = Filters(until - dt.timedelta(days=7), until)
    run_id = str(runs[runs["exhausted"].fillna(False).astype(bool)].iloc[-1]["run_id"])
    print(f"{db}: {spans:,} spans, {len(runs):,} runs; last week = {week.since:%Y-%m-%d} → "
          f"{week.until:%Y-%m-%d}")
    return week, run_id


def page_queries(db: Path, page: str, filters: Filters, run_id: str) -> float:
    """One batch as the dashboard does it: open read-only, run the page's queries, close."""
    started = time.perf_counter()
    con = connect(db, read_only=True)
    try:
        for name in PAGE_QUERIES[page]:
            if name == "run_view":
                load_run(con, run_id)
                continue
            f = filters
            if name.startswith("prev:"):
                name = name[5:]
                if f.since is None or f.until is None:
                    continue
                f = Filters(f.since - (f.until - f.since), f.since, f.agent)
            getattr(reports, name)(con, f)
    finally:
        con.close()
    return time.perf_counter() - started


def timed(fn: Callable[[], float], repeat: int) -> tuple[float, float]:
    first = fn()
    return first, statistics.median(fn() for _ in range(repeat))


def bench_queries(db: Path, week: Filters, run_id: str, repeat: int) -> None:
    print("\nqueries per page (open + queries + close), seconds: first / warm median")
    for label, filters in (("last 7 days", week), ("all time", Filters())):
        cells = []
        for page in PAGE_QUERIES:
            first, warm = timed(lambda p=page, f=filters: page_queries(db, p, f, run_id), repeat)
            cells.append(f"{page} {first:.3f}/{warm:.3f}")
        print(f"  {label:<12} " + "  ".join(cells))


def url_for(page: str, filters: Filters, run_id: str) -> str:
    if filters.since is None:
        query = "range=all"
    else:
        query = (f"range=custom&since={filters.since:%Y-%m-%d}&until={filters.until:%Y-%m-%d}")
    if page in ("run", "compare"):  # the comparison view opens beside the typical run
        return f"/{page}?{query}&run={run_id}"
    return f"/{'' if page == 'overview' else page}?{query}"


def time_visit(tab: object, url: str, charts: int) -> float:
    """Seconds from navigating `tab` to `url` to the page drawn with `charts` charts (its script
    over, no skeleton left: bench/support/browser.PAGE_DRAWN): the same measure for the
    dashboard's pages and for the floor pages (FloorApp)."""
    started = time.perf_counter()
    tab.goto(url)  # type: ignore[attr-defined]
    tab.wait_for_function(PAGE_DRAWN, arg=charts, timeout=120_000)  # type: ignore[attr-defined]
    return time.perf_counter() - started


def first_visit(browser: object, url: str, charts: int) -> tuple[float, float]:
    """A first visit in a fresh browser context (no cached JavaScript, like a first-time
    visitor) and one revisit in the same context (cached, like someone using the dashboard)."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})  # type: ignore
    tab = context.new_page()
    try:
        return time_visit(tab, url, charts), time_visit(tab, url, charts)
    finally:
        context.close()


def bench_browser(db: Path, week: Filters, run_id: str, repeat: int) -> None:
    from playwright.sync_api import sync_playwright

    log = Path("/tmp") / f"bench-dashboard-{db.stem}.log"
    app = Dashboard(str(db), log)
    floor = FloorApp()
    print(f"\nbrowser: {app.url}, headless Chromium; seconds from navigation to the page drawn"
          " with its Plotly charts: first visit / revisit median; then the page's first visit "
          "against two floors with as many charts (floor_app.py, median of "
          f"{FLOOR_SAMPLES} first visits each, measured just before the page's): the bare floor "
          "(a title and the charts) and the furnished floor (the charts among a dashboard "
          "page's sidebar, widgets, metrics and tables, with constant data)")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            for label, filters in (("last 7 days", week), ("all time", Filters())):
                cells, ratios = [], []
                for page, charts in PAGE_CHARTS.items():
                    bare, furnished = (
                        statistics.median(first_visit(browser, floor.url(charts, furnish, page),
                                                      charts)[0]
                                          for _ in range(FLOOR_SAMPLES))
                        for furnish in (False, True))
                    # The page's first visit is one sample: after it the Streamlit cache holds
                    # this filter's results, and later visits would be revisits on the server.
                    context = browser.new_context(viewport={"width": 1400, "height": 2400})
                    tab = context.new_page()
                    url = app.url + url_for(page, filters, run_id)
                    first = time_visit(tab, url, charts)
                    again = statistics.median(time_visit(tab, url, charts)
                                              for _ in range(repeat))
                    context.close()
                    cells.append(f"{page} {first:.2f}/{again:.2f}")
                    ratios.append(f"{page} {first / bare:.2f}× / {first / furnished:.2f}× "
                                  f"({first:.2f}/{bare:.2f}/{furnished:.2f})")
                print(f"  {label:<12} " + "  ".join(cells), flush=True)
                print(f"  {'':<12} first visit / bare floor / furnished floor: "
                      + "  ".join(ratios), flush=True)
            bench_navigation(browser, app.url, week, run_id, repeat)
            browser.close()
    finally:
        app.stop()
        floor.stop()


TITLES = {"overview": "Overview", "attribution": "Attribution", "failures": "Failures",
          "utilisation": "Utilisation", "reconciliation": "Reconciliation", "run": "Run view",
          "runs": "Runs", "weekly": "Weekly report", "simulate": "What if", "budgets": "Budgets"}


# What a tab shows, said when a wait times out: which page, how far its script got, what it drew.
_WHAT_IS_SHOWN = """() => ({
  titles: [...document.querySelectorAll('[data-testid=stMain] h1')].map(h => h.innerText),
  script: document.querySelector('[data-test-script-state]')?.getAttribute(
    'data-test-script-state'),
  chartElements: document.querySelectorAll('[data-testid=stPlotlyChart]').length,
  plotlyPlots: document.querySelectorAll('.js-plotly-plot').length,
  mainSvgs: document.querySelectorAll('.js-plotly-plot .main-svg').length,
  messages: [...document.querySelectorAll('[data-testid=stAlert], [data-testid=stException]')]
    .map(a => a.innerText.slice(0, 300)),
})"""


def bench_navigation(browser: object, base: str, week: Filters, run_id: str,
                     repeat: int) -> None:
    """How someone moves around: one tab, pages switched with the sidebar (Streamlit keeps the
    connection and the JavaScript), timed from the click to the page drawn with its charts."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})  # type: ignore
    tab = context.new_page()
    # The run view then remembers its run. Clicks start from a page that has drawn
    # (time_visit): the script state alone reads "notRunning" while elements are still loading.
    time_visit(tab, base + url_for("run", week, run_id), PAGE_CHARTS["run"])
    times: dict[str, list[float]] = {page: [] for page in TITLES}
    for round_ in range(repeat + 1):
        for page, title in TITLES.items():
            started = time.perf_counter()
            tab.locator('[data-testid="stSidebarNav"]').get_by_text(title, exact=True).click()
            waiting_for = "its title"
            try:
                tab.wait_for_function(
                    "(t) => { const h = document.querySelector('[data-testid=stMain] h1');"
                    " return h && h.innerText.trim() === t; }", arg=title, timeout=120_000)
                waiting_for = f"it to be drawn with {PAGE_CHARTS[page]} charts"
                tab.wait_for_function(PAGE_DRAWN, arg=PAGE_CHARTS[page], timeout=120_000)
            except Exception as error:
                shot = Path("/tmp") / f"bench-dashboard-navigation-{page}.png"
                tab.screenshot(path=str(shot), full_page=True)
                raise RuntimeError(f"round {round_}, {title}: waited for {waiting_for}; the "
                                   f"tab shows {tab.evaluate(_WHAT_IS_SHOWN)} at {tab.url} "
                                   f"({shot})") from error
            times[page].append(time.perf_counter() - started)
    context.close()
    print("  sidebar navigation (last 7 days), first / median of the rest: " + "  ".join(
        f"{page} {t[0]:.2f}/{statistics.median(t[1:]):.2f}" for page, t in times.items()))


def visit(browser: object, url: str, charts: int) -> float:
    """One first visit in a fresh browser context, timed (time_visit)."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})  # type: ignore
    try:
        return time_visit(context.new_page(), url, charts)
    finally:
        context.close()


def _spread(times: list[float]) -> str:
    return f"{statistics.median(times):.2f} [{min(times):.2f}-{max(times):.2f}]"


def bench_against(db: Path, other: Path, filters: Filters, label: str, run_id: str,
                  rounds: int, pages: list[str]) -> None:
    """Each page's first visit on `other`'s dashboard and on this checkout's, with `filters`
    (`label` says which), beside the two floors, in turn, `rounds` rounds (the docstring's
    --against)."""
    from playwright.sync_api import sync_playwright

    servers = {"other": Dashboard(str(db), Path("/tmp") / "bench-dashboard-other.log",
                                  checkout=other.resolve()),
               "this": Dashboard(str(db), Path("/tmp") / "bench-dashboard-this.log")}
    floor = FloorApp()
    print(f"\nfirst visits (s), median [min-max] of {rounds} rounds, {label}: the page on "
          f"{other} (other) and on {ROOT} (this), the bare and the furnished floor with as "
          "many charts; headless Chromium 1400x2400")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            for page in pages:
                charts = PAGE_CHARTS[page]
                urls = {name: server.url + url_for(page, filters, run_id)
                        for name, server in servers.items()}
                urls["bare"] = floor.url(charts)
                urls["furnished"] = floor.url(charts, furnished=True, page=page)
                for url in urls.values():  # untimed: each server imports the page's code once
                    visit(browser, url, charts)
                times: dict[str, list[float]] = {name: [] for name in urls}
                for round_ in range(rounds):
                    for name in (list(urls) if round_ % 2 == 0 else list(urls)[::-1]):
                        os.utime(db)
                        times[name].append(visit(browser, urls[name], charts))
                this, other_ = (statistics.median(times[name]) for name in ("this", "other"))
                furnished = statistics.median(times["furnished"])
                print(f"  {page:<15} other {_spread(times['other'])}  this "
                      f"{_spread(times['this'])}  this/other {this / other_:.2f}x  bare "
                      f"{_spread(times['bare'])}  furnished {_spread(times['furnished'])}  "
                      f"/ furnished: other {other_ / furnished:.2f}x this "
                      f"{this / furnished:.2f}x", flush=True)
            browser.close()
    finally:
        for server in servers.values():
            server.stop()
        floor.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, help="an existing database (else --runs builds one)")
    parser.add_argument("--runs", type=int, default=35_000)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--no-queries", action="store_true", help="the browser part only")
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="another checkout: first visits on its dashboard and this one's")
    parser.add_argument("--rounds", type=int, default=5, help="with --against")
    parser.add_argument("--all-time", action="store_true",
                        help="with --against, the pages over all time (else the last 7 days)")
    parser.add_argument("--pages", default=",".join(PAGE_CHARTS),
                        help="with --against, comma-separated, of: " + ", ".join(PAGE_CHARTS))
    options = parser.parse_args()
    pages = [page for page in options.pages.split(",") if page]
    if set(pages) - PAGE_CHARTS.keys():
        parser.error(f"unknown pages {sorted(set(pages) - PAGE_CHARTS.keys())}")
    db = options.db or build(options.workdir, options.runs)
    week, run_id = describe(db)
    if not options.no_queries:
        bench_queries(db, week, run_id, options.repeat)
    if options.against is not None:
        filters, label = (Filters(), "all time") if options.all_time else (week, "last 7 days")
        bench_against(db, options.against, filters, label, run_id, options.rounds, pages)
    elif not options.no_browser:
        bench_browser(db, week, run_id, options.repeat)


if __name__ == "__main__":
    main()
