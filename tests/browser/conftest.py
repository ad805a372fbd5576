"""The browser and the sample dashboard the browser test modules share. Both are module-scoped:
each module launches its own Chromium and starts its own dashboard process, so what one
module's tests leave behind (a page's session state, a browser context) never reaches another,
whatever order the modules run in. A module may define its own instead, as the access tests do
with a browser that resolves every name to 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import ui


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=str(ui.CHROMIUM),
                                     args=list(ui.CHROMIUM_ARGS))
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def sample_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ui.Dashboard]:
    """`budgetscope dashboard` on the sample traces (the database file is built once a session,
    ui.sample_db; the dashboard process is this module's own)."""
    db = ui.sample_db(tmp_path_factory)
    app = ui.Dashboard(db, tmp_path_factory.mktemp("logs") / "dashboard.log")
    app.db = db  # type: ignore[attr-defined]
    yield app
    app.stop()


@pytest.fixture()
def page(browser: object) -> Iterator[object]:
    """A tab in a fresh context, its dialogs collected in `tab.dialogs` (a module may define
    its own `page` in this one's place)."""
    # Tall viewport: Streamlit scrolls an inner container, so a full-page screenshot only
    # holds what fits the window.
    context = browser.new_context(viewport={"width": 1400, "height": 3200},  # type: ignore[attr-defined]
                                  accept_downloads=True)
    tab = context.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    tab.dialogs = dialogs
    yield tab
    context.close()
