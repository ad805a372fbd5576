"""What a page costs in the browser before budgetscope adds anything: Streamlit (the installed
version) serving floor_app.py, a title and 0, 1, 2 or 3 trivial Plotly bar charts, timed in
headless Chromium exactly as bench_dashboard.py times the real pages (bench_dashboard.time_visit:
navigation to the page drawn with every chart; first visit in a fresh browser context, then a
revisit in the same one). bench_dashboard.py also measures this floor beside each page, in the
same run, and prints each page's first visit as a ratio of it.

Each count of charts is also served furnished (floor_app.py's `furnish=1`: the sidebar, widgets,
metrics, captions and tables of a dashboard page, with constant data and no query), so the
furnished / bare ratio is what those elements alone cost on this stack.

    .venv/bin/python bench/bench_browser_floor.py [--repeat 5]

Figures, never assertions. The gap between these and bench_dashboard.py's figures is what the
dashboard's own pages add (queries, figures, tables, the sidebar).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_dashboard import ARGS, first_visit  # noqa: E402
from tests.browser.support import free_port  # noqa: E402

APP = Path(__file__).with_name("floor_app.py")
FLOOR_SAMPLES = 3  # first visits of the floor per dashboard page in bench_dashboard.py


class FloorApp:
    """`streamlit run floor_app.py` on a free port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(APP), "--server.port",
             str(self.port), "--server.address", "127.0.0.1", "--server.headless", "true",
             "--browser.gatherUsageStats", "false"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_stcore/health",
                                            timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("streamlit did not start")

    def url(self, charts: int, furnished: bool = False) -> str:
        return f"http://127.0.0.1:{self.port}/?n={charts}" + ("&furnish=1" if furnished else "")

    def stop(self) -> None:
        self.server.terminate()
        try:
            self.server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    from playwright.sync_api import sync_playwright

    floor = FloorApp()
    print("Streamlit floor page in headless Chromium, seconds from navigation to the page drawn "
          "(bench_dashboard.time_visit): first visit (fresh context) / revisit, median "
          "[min-max]; bare, then furnished with a dashboard page's elements (floor_app.py), "
          "visited in turn")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            for charts in (0, 1, 2, 3):
                visits: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
                for round_ in range(options.repeat):
                    for furnished in ((False, True) if round_ % 2 == 0 else (True, False)):
                        visits[furnished].append(
                            first_visit(browser, floor.url(charts, furnished), charts))
                cells = []
                for furnished, label in ((False, "bare"), (True, "furnished")):
                    first = [v[0] for v in visits[furnished]]
                    again = [v[1] for v in visits[furnished]]
                    cells.append(f"{label} first {statistics.median(first):.2f} "
                                 f"[{min(first):.2f}-{max(first):.2f}] revisit "
                                 f"{statistics.median(again):.2f} "
                                 f"[{min(again):.2f}-{max(again):.2f}]")
                ratio = (statistics.median(v[0] for v in visits[True])
                         / statistics.median(v[0] for v in visits[False]))
                print(f"  {charts} charts: " + "; ".join(cells)
                      + f"; furnished / bare first visit {ratio:.2f}x", flush=True)
            browser.close()
    finally:
        floor.stop()


if __name__ == "__main__":
    main()
