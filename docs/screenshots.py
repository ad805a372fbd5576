"""Take the README's screenshots (docs/images/*.png) of the dashboard on the bundled sample.

    .venv/bin/budgetscope demo --port 8611 &                  # in a scratch folder
    .venv/bin/python docs/screenshots.py --base http://127.0.0.1:8611 --run a5c7606f

Debian's Chromium (/usr/bin/chromium) through Playwright, never a downloaded browser. The
viewport is tall because Streamlit scrolls inside its own container: a full-page capture of
the document would stop at the first screen.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

IMAGES = Path(__file__).resolve().parent / "images"
CHROMIUM = "/usr/bin/chromium"
# The sample's own weeks, as `budgetscope demo` opens them.
RANGE = "range=custom&since=2026-10-26&until=2026-11-30"


def settle(page: Page) -> None:
    """Wait until Streamlit has finished the script run and drawn its charts."""
    page.wait_for_selector("[data-testid='stApp']", timeout=120_000)
    page.wait_for_function(
        "() => !document.querySelector(\"[data-testid='stStatusWidget']\")", timeout=120_000)
    page.wait_for_load_state("networkidle", timeout=120_000)
    page.wait_for_timeout(3_000)  # Plotly's transitions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8501")
    parser.add_argument("--run", required=True, help="an exhausted run's id (or its start)")
    args = parser.parse_args()
    IMAGES.mkdir(exist_ok=True)
    shots = {"overview.png": f"{args.base}/?{RANGE}",
             "run-view.png": f"{args.base}/run?run={args.run}&{RANGE}"}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1440, "height": 2000})
        for name, url in shots.items():
            page.goto(url)
            settle(page)
            page.screenshot(path=str(IMAGES / name))
            print(IMAGES / name)
        browser.close()


if __name__ == "__main__":
    main()
