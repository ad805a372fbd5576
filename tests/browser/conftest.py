"""The browsers and the sample dashboard the browser test modules share, once a session.

One Chromium for the session (`browser`), and one more that resolves every name to 127.0.0.1
(`rebinding_browser`, what DNS rebinding achieves) for the modules that need it: launching
Chromium costs seconds on 2 loaded cores, and each test still gets a context of its own (its
own cookies, storage and Streamlit session), so nothing one test leaves in a browser reaches
another. One dashboard on the session's sample (`sample_app`) for every module that only reads
it with the default options; a Streamlit session lives in its browser context, so a test's
widgets and filters never reach another's. A module that writes to its database or starts
the dashboard with other options starts its own (the access, writer and on-call modules)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import ui


@pytest.fixture(scope="session")
def playwright() -> Iterator[object]:
    """Playwright's driver, once a session: its sync API runs one instance per thread."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        yield p


def _chromium(playwright: object, *extra_args: str) -> Iterator[object]:
    instance = playwright.chromium.launch(executable_path=str(ui.CHROMIUM),  # type: ignore[attr-defined]
                                          args=[*ui.CHROMIUM_ARGS, *extra_args])
    yield instance
    instance.close()


@pytest.fixture(scope="session")
def browser(playwright: object) -> Iterator[object]:
    yield from _chromium(playwright)


@pytest.fixture(scope="session")
def rebinding_browser(playwright: object) -> Iterator[object]:
    """Chromium in which every name resolves to 127.0.0.1: a page on an attacker's name
    reaches the local server, as after DNS rebinding."""
    yield from _chromium(playwright, "--host-resolver-rules=MAP * 127.0.0.1")


@pytest.fixture(scope="session")
def sample_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ui.Dashboard]:
    """`budgetscope dashboard` on the sample traces, read only (the database file is built once
    a session, ui.sample_db), shared by every module that takes it."""
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
