"""A failed run's view and its comparison as a demanding user meets them at a 1400 px window:
headless Debian Chromium, each page waited for until Streamlit's script run is over, no skeleton
is left and its chart is drawn. The run view shows its steps table with the columns on-call
reads first; on both pages no table scrolls sideways (a column cut on the right), no table cell
reads Python's None or NaN and no dialog opened; each is shot whole into
test-artifacts/screenshots/ (page-run-failed.png, page-compare-failed.png). The checks are
tests/support/page_fit.py's.

Every other page (and the exhausted run's view and comparison) gets the same checks and shots
in tests/browser/test_browser_narrow.py, on the page it loads at 1400 px in the light theme: one
page load for both (a Streamlit page load costs Chromium ~4 core-seconds). What a page's text
says (its headers, the start to the minute, the empty database's page) is read under AppTest,
without a browser: tests/dashboard/test_dashboard_tables.py and
tests/dashboard/test_dashboard_pages.py."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from tests.support import page_fit as fit
from tests.support import ui

pytest.importorskip("playwright.sync_api")  # the browser fixture (conftest.py) drives it
pytestmark = pytest.mark.skipif(not ui.CHROMIUM.exists(), reason="needs Debian's chromium")


@pytest.fixture()
def page(page: object) -> object:
    """conftest.py's tab, at 1400 × 1600."""
    page.set_viewport_size({"width": fit.WIDTH, "height": fit.HEIGHT})  # type: ignore[attr-defined]
    return page


def runs_of(db: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(cli, ["--db", db, "report", "runs", "--since", ui.SINCE,
                                      "--until", ui.UNTIL, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_failed_runs_view_and_its_comparison_fit(sample_app: ui.Dashboard,
                                                   page: object) -> None:
    run = next(r for r in runs_of(sample_app.db) if r["outcome"] == "failed")  # type: ignore[attr-defined]
    page.goto(f"{sample_app.url}/run?{ui.QUERY}&run={run['run_id']}")  # type: ignore[attr-defined]
    fit.check(page, fit.run_view("failed"), 1)
    page.goto(f"{sample_app.url}/compare?{ui.QUERY}&run={run['run_id']}")  # type: ignore[attr-defined]
    fit.check(page, fit.comparison("failed"), 1)
