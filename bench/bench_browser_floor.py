"""What a page costs in the browser before budgetscope adds anything: Streamlit (the installed
version) serving floor_app.py, a title and 0, 1 or 3 trivial Plotly bar charts, timed in headless
Chromium exactly as bench_dashboard.py times the real pages (navigation to the script finished
and every chart drawn; first visit in a fresh browser context, then a revisit in the same one).

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

from bench.bench_dashboard import ARGS  # noqa: E402
from tests.browser.support import free_port  # noqa: E402

APP = Path(__file__).with_name("floor_app.py")


def start(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(APP), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return server
        except OSError:
            time.sleep(0.3)
    server.kill()
    raise RuntimeError("streamlit did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    from playwright.sync_api import sync_playwright

    port = free_port()
    server = start(port)
    print("Streamlit floor page in headless Chromium, seconds from navigation to the charts "
          "drawn: first visit (fresh context) / revisit, median [min-max]")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            for charts in (0, 1, 3):
                first: list[float] = []
                again: list[float] = []
                for _ in range(options.repeat):
                    context = browser.new_context(viewport={"width": 1400, "height": 2400})
                    tab = context.new_page()
                    for times in (first, again):
                        started = time.perf_counter()
                        tab.goto(f"http://127.0.0.1:{port}/?n={charts}")
                        tab.wait_for_selector('[data-test-script-state="notRunning"]',
                                              timeout=60_000)
                        tab.wait_for_function(
                            "(n) => document.querySelectorAll('.js-plotly-plot .main-svg')"
                            ".length >= 3 * n", arg=charts, timeout=60_000)
                        times.append(time.perf_counter() - started)
                    context.close()
                print(f"  {charts} charts: first {statistics.median(first):.2f} "
                      f"[{min(first):.2f}-{max(first):.2f}]  revisit "
                      f"{statistics.median(again):.2f} [{min(again):.2f}-{max(again):.2f}]",
                      flush=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
