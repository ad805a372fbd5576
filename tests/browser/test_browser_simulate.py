"""The What-if page in a real browser: Debian's Chromium, headless, driven by
Playwright, against `budgetscope dashboard` as a subprocess on the sample traces. Moving the
deadline slider with the keyboard reruns the replay and the predicted figures change to what
`simulate` says for that deadline."""

from __future__ import annotations

import time

import pytest

from dashboard import fmt
from queries.filters import Filters
from simulation.data import simulate
from simulation.policy import SimulationPolicy
from store import connect
from tests.support import ui

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = ui.CHROMIUM
SHOTS = ui.REPO / "test-artifacts" / "screenshots"
QUERY = f"range=custom&since={ui.SINCE}&until={ui.UNTIL}"
TIMEOUT_MS = 90_000

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")


@pytest.fixture()
def app(sample_app: ui.Dashboard) -> ui.Dashboard:
    """The session's dashboard on the sample (conftest.py): the slider changes only this
    test's Streamlit session, nothing in the file."""
    return sample_app


@pytest.fixture()
def tab(page: object) -> object:
    """conftest.py's tab, at 1400 × 3200."""
    return page


def metric(tab: object, label: str) -> str:
    box = tab.locator('[data-testid="stMetric"]').filter(has_text=label)  # type: ignore[attr-defined]
    return box.locator('[data-testid="stMetricValue"]').first.inner_text().strip()


def predicted(db: str, deadline: str | None) -> dict[str, str]:
    con = connect(db, read_only=True)
    try:
        result = simulate(con, SimulationPolicy.parse(deadline=deadline),
                          Filters.parse(ui.SINCE, ui.UNTIL))
    finally:
        con.close()
    rows = result.summary.set_index("metric")["predicted"]
    return {"Exhaustion rate": fmt.percent(rows["exhaustion_rate"]),
            "Client timeout rate": fmt.percent(rows["client_timeout_rate"])}


def test_moving_the_deadline_slider_changes_the_prediction(app: ui.Dashboard,
                                                           tab: object) -> None:
    tab.goto(f"{app.url}/simulate?{QUERY}")  # type: ignore[attr-defined]
    ui.settle(tab, charts=2)
    db = app.db  # type: ignore[attr-defined]
    assert {k: metric(tab, k) for k in ("Exhaustion rate", "Client timeout rate")} == \
        predicted(db, None)
    # Off, the deadline is "as recorded" and no slider shows a value; set one to move it.
    tab.locator('[data-testid="stCheckbox"]').filter(  # type: ignore[attr-defined]
        has_text="Set one run deadline").locator("label").first.click()
    tab.wait_for_selector('[data-testid="stSlider"]:has-text("Run deadline")',  # type: ignore[attr-defined]
                          timeout=TIMEOUT_MS)
    ui.settle(tab, charts=2)
    slider = (tab.locator('[data-testid="stSlider"]')  # type: ignore[attr-defined]
              .filter(has_text="Run deadline").locator('input[type="range"]'))
    before = metric(tab, "Exhaustion rate")
    slider.focus()
    began = time.perf_counter()
    slider.press("Home")  # the slider's minimum: a 1 s deadline for every budgeted run
    tab.wait_for_function(  # type: ignore[attr-defined]
        """([label, old]) => [...document.querySelectorAll('[data-testid="stMetric"]')]
               .some(m => m.innerText.includes(label)
                     && !m.querySelector('[data-testid="stMetricValue"]').innerText
                          .includes(old))""",
        arg=["Exhaustion rate", before], timeout=TIMEOUT_MS)
    ui.settle(tab, charts=2)
    print(f"slider to new figures in the browser: {time.perf_counter() - began:.2f} s")
    assert float(slider.input_value()) == 1.0
    after = {k: metric(tab, k) for k in ("Exhaustion rate", "Client timeout rate")}
    assert after == predicted(db, "1s")
    assert after["Exhaustion rate"] != before
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / "simulate-deadline-1s.png"), full_page=True)  # type: ignore[attr-defined]
