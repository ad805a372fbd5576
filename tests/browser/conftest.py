"""The browser and the sample dashboard the browser test modules share. Both are module-scoped:
each module launches its own Chromium and starts its own dashboard process, so what one
module's tests leave behind (a page's session state, a browser context) never reaches another,
whatever order the modules run in. A module may define its own instead, as the access tests do
with a browser that resolves every name to 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.browser import support


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=str(support.CHROMIUM),
                                     args=list(support.CHROMIUM_ARGS))
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def sample_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.Dashboard]:
    """`budgetscope dashboard` on the sample traces (the database file is built once a session,
    support.sample_db; the dashboard process is this module's own)."""
    db = support.sample_db(tmp_path_factory)
    app = support.Dashboard(db, tmp_path_factory.mktemp("logs") / "dashboard.log")
    app.db = db  # type: ignore[attr-defined]
    yield app
    app.stop()
