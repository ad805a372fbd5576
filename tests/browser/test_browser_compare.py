"""The comparison view in a real browser (Debian's Chromium, headless): opened from the run
view's link, it shows the typical run of the agent beside the run, draws its chart with a
tooltip written for it, and a deep link with `with=` compares with the chosen run."""

from __future__ import annotations

from contextlib import closing
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest

from queries import reports, run_compare
from queries.filters import Filters
from store import connect
from tests.support import ui

pytestmark = pytest.mark.skipif(not ui.CHROMIUM.exists(), reason="needs Debian's chromium")
QUERY = ui.QUERY
TIMEOUT_MS = 90_000


def _typical_and_another(db: str, run_id: str) -> tuple[str, str]:
    with closing(connect(db, read_only=True)) as con:
        runs = reports.runs(con, Filters.parse(ui.SINCE, ui.UNTIL))
        agent = runs.set_index("run_id").loc[run_id, "agent"]
        start = runs.set_index("run_id").loc[run_id, "start"]
        # around the run's own start, as the page looks for it (not the sidebar's range)
        choice, _ = run_compare.typical_around(int(pd.Timestamp(start).value), agent, run_id,
                                               lambda filters: reports.runs(con, filters))
    typical = choice.run_id
    assert typical and choice.window.startswith("the week around this run's start")
    another = next(r for r in runs[(runs["agent"] == agent) & (runs["outcome"] == "completed")]
                   ["run_id"] if r not in (run_id, typical))
    return typical, another


def test_comparison_opens_from_the_run_view(sample_app: ui.Dashboard,
                                            page: object) -> None:
    run_id = ui.exhausted_run(sample_app.db)  # type: ignore[attr-defined]
    typical, another = _typical_and_another(sample_app.db, run_id)  # type: ignore[attr-defined]
    page.goto(f"{sample_app.url}/run?{QUERY}&run={run_id}")  # type: ignore[attr-defined]
    ui.settle(page, charts=1)
    page.get_by_role("link", name="Compare with a typical run of this agent").click()  # type: ignore[attr-defined]
    page.wait_for_url("**/compare?**", timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    ui.settle(page, charts=1)
    assert ui.heading(page) == "Compare runs"
    query = parse_qs(urlsplit(page.url).query)  # type: ignore[attr-defined]
    assert query["run"] == [run_id] and "with" not in query
    assert query["since"] == [ui.SINCE]  # the filters came along
    main = page.locator("[data-testid=stMain]")  # type: ignore[attr-defined]
    text = main.inner_text()
    assert f"against the typical run {typical}" in text
    assert "median-utilisation completed run of" in text
    assert "Where the time went differently" in text and "Step by step" in text
    assert "None" not in text and "nan" not in text
    # the chart's tooltip is ours: the full step key, the step count, units
    bars = page.locator(".js-plotly-plot .bars path")  # type: ignore[attr-defined]
    # a bar wide enough to hover (a step key one run lacks draws a bar of no width)
    bar = next(bars.nth(i) for i in range(bars.count())
               if (bars.nth(i).bounding_box() or {}).get("width", 0) > 4)
    bar.hover(force=True)
    hover = page.locator(".hoverlayer")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "document.querySelector('.hoverlayer') && "
        "document.querySelector('.hoverlayer').textContent.includes('step key')",
        timeout=TIMEOUT_MS)
    tooltip = hover.first.text_content() or ""
    assert "step(s)" in tooltip and "consumption" in tooltip, tooltip
    ui.shoot(page, "compare-typical")

    # A deep link naming the other run compares with that one.
    page.goto(f"{sample_app.url}/compare?{QUERY}&run={run_id}&with={another}")  # type: ignore[attr-defined]
    ui.settle(page, charts=1)
    text = page.locator("[data-testid=stMain]").inner_text()  # type: ignore[attr-defined]
    assert f"against the chosen run {another}" in text
    assert parse_qs(urlsplit(page.url).query)["with"] == [another]  # type: ignore[attr-defined]
    ui.shoot(page, "compare-chosen")
