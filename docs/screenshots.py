"""Take the README's screenshots (docs/images/*.png) of the dashboard on the bundled sample.

    .venv/bin/budgetscope demo --port 8611 &                  # in a scratch folder
    .venv/bin/python docs/screenshots.py --base http://127.0.0.1:8611 --run a5c7606f \
        --usd-run dcf26a99

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
    parser.add_argument("--usd-run", required=True,
                        help="a dollar-exhausted run whose culprit is not its crosser")
    args = parser.parse_args()
    IMAGES.mkdir(exist_ok=True)
    # name -> (address, window height): the dollar run's cumulative spend is drawn below its
    # waterfall
    shots = {"overview.png": (f"{args.base}/?{RANGE}", 2000),
             "run-view.png": (f"{args.base}/run?run={args.run}&{RANGE}", 2000),
             "cost.png": (f"{args.base}/cost?{RANGE}", 2000),
             "cost-run.png": (f"{args.base}/run?run={args.usd_run}&{RANGE}", 5000)}
    # the dollar run: from its cost headline to its cumulative spend, what the shot is for
    clips = {"cost-run.png": (".st-key-run_cost_headline", ".st-key-cumulative_spend")}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1440, "height": 2000})
        for name, (url, height) in shots.items():
            page.set_viewport_size({"width": 1440, "height": height})
            page.goto(url)
            settle(page)
            if name in clips:
                top, bottom = (page.locator(selector).first.bounding_box()
                               for selector in clips[name])
                assert top and bottom, f"{name}: {clips[name]} not drawn"
                page.screenshot(path=str(IMAGES / name), clip={
                    "x": 0, "y": top["y"] - 4, "width": 1440,
                    "height": bottom["y"] + bottom["height"] - top["y"] + 28})
            else:
                page.screenshot(path=str(IMAGES / name))
            print(IMAGES / name)
        browser.close()


if __name__ == "__main__":
    main()
