"""The standalone dashboard in a real browser (Debian's Chromium, headless) while `budgetscope
ingest` writes the file it shows: the Runs page, searching by culprit and following new spans
every second, never shows an error, keeps its search, and shows the new runs once the ingest is
over, with nobody touching the tab. Before, "Could not draw Runs: KeyError ... rs_culprit"
came within 1-2 s of an ingest of 6,000 spans in 5 of 7 trials, until the tab was reloaded."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ui

pytest.importorskip("playwright.sync_api")  # the browser fixture (conftest.py) drives it
pytestmark = pytest.mark.skipif(not ui.CHROMIUM.exists(), reason="needs Debian's chromium")
CLI = [sys.executable, "-c", "from budgetscope.cli import main; main()"]
CULPRIT = "tool:fetch_report"
MATCH = re.compile(r"([\d,]+)\*?\*? runs match")
# Keeps every text the page's main area shows, each time it changes, in `window.mainTexts`:
# every redraw during an ingest is checked, not a sample of them.
_KEEP_TEXTS = """() => {
  const main = () => document.querySelector('[data-testid=stMain]');
  window.mainTexts = new Set([main().innerText]);
  new MutationObserver(() => window.mainTexts.add(main()?.innerText ?? ''))
    .observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


@pytest.fixture()
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 2000})  # type: ignore[attr-defined]
    yield context.new_page()
    context.close()


def _traces(folder: Path, seed: int) -> Path:
    """About 6,000 spans of 200 runs the sample generator has not made yet (another seed)."""
    out = folder / f"more-{seed}.jsonl"
    subprocess.run([sys.executable, "-m", "sample_traces.generate", "--out", str(out),
                    "--seed", str(seed), "--runs", "200"], check=True, cwd=ui.REPO,
                   capture_output=True, timeout=600)
    return out


def _matching(tab: object) -> int:
    text = tab.locator("[data-testid=stMain]").inner_text()  # type: ignore[attr-defined]
    found = MATCH.search(text)
    assert found, text[:2000]
    return int(found.group(1).replace(",", ""))


def test_runs_page_through_ingests(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                   page: object) -> None:
    db = tmp_path / "ingested.duckdb"
    shutil.copyfile(ui.sample_db(tmp_path_factory), db)
    files = [_traces(tmp_path, seed) for seed in (101, 102, 103)]
    app = ui.Dashboard(str(db), tmp_path / "dashboard.log", refresh_seconds=1)
    env = {key: value for key, value in os.environ.items() if key != "BUDGETSCOPE_DB"}
    try:
        page.goto(f"{app.url}/runs?range=all&culprit={CULPRIT}")  # type: ignore[attr-defined]
        ui.settle(page)
        before = _matching(page)
        for traces in files:
            page.evaluate(_KEEP_TEXTS)  # type: ignore[attr-defined]
            ingest = subprocess.Popen([*CLI, "--db", str(db), "ingest", "--no-progress",
                                       str(traces)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
            # The page refreshes meanwhile, every second, keeping what it shows.
            output = ingest.communicate(timeout=600)[0]
            assert ingest.returncode == 0, output
            # The redraws after: two runs begun once the ingest was over have finished (the
            # watcher's check, and the redraw it asked for or the next check).
            ui.settle_after_runs(page, ui.script_runs(page) + 2)
            seen = set(page.evaluate("() => [...window.mainTexts]"))  # type: ignore[attr-defined]
            seen.add(page.locator("[data-testid=stMain]").inner_text())  # type: ignore[attr-defined]
            broken = [text for text in seen if "Could not" in text or "KeyError" in text]
            assert not broken, broken[0][:2000]
            assert page.locator('[data-testid="stException"]').count() == 0  # type: ignore[attr-defined]
        # The new runs arrive on their own; the search is still the culprit's.
        page.wait_for_function(  # type: ignore[attr-defined]
            "(before) => { const m = document.querySelector('[data-testid=stMain]').innerText"
            ".match(/([\\d,]+)\\*?\\*? runs match/); "
            "return m && Number(m[1].replace(/,/g, '')) > before; }", arg=before,
            timeout=60_000)
        assert f"culprit={CULPRIT}" in page.url.replace("%3A", ":")  # type: ignore[attr-defined]
    finally:
        app.stop()
