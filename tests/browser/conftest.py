"""The browsers and the sample dashboard the browser test modules share, once a session.

One Chromium for the session (`browser`), and one more that resolves every name to 127.0.0.1
(`rebinding_browser`, what DNS rebinding achieves) for the modules that need it: launching
Chromium costs seconds on 2 loaded cores. One dashboard on the session's sample
(`sample_app`) for every module that only reads it with the default options; a Streamlit session
lives in its browser document, so a test's widgets and filters never reach another's. A module
that writes to its database or starts the dashboard with other options starts its own (the
access, writer and on-call modules).

A test's tab (`page`) is a new tab in one context of the session, a third Chromium with a
profile on disk, whose HTTP cache and compiled scripts carry over from test to test: in a fresh
context every page load fetched and compiled Streamlit's code again, 4.7 MB of it for the
charts, and took twice as long (3.9 s against 1.8 s for the Narrow pages at 900 px on 2 loaded
cores). Nothing else carries over: each document starts with
empty local and session storage (the dashboard keeps its sidebar's state there) and each test
with no cookies, so every page load meets the page as a new visitor does. A test about a first
visit's fetches takes `cold_page`, a tab in a fresh context of its own."""

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


# Run before any script of every document of the warm context: what a fresh context starts with.
_EMPTY_STORAGE = "try { localStorage.clear(); sessionStorage.clear(); } catch (e) {}"
# Tall viewport: Streamlit scrolls an inner container, so a full-page screenshot only holds what
# fits the window.
_TALL = {"width": 1400, "height": 3200}


@pytest.fixture(scope="session")
def _warm_context(playwright: object, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[object]:
    """The session's context for `page`: its HTTP cache and compiled code carry over, its
    storage does not. A Chromium of its own with a profile on disk, not a context of `browser`:
    Chromium keeps no code cache for the in-memory profile of a new context, so every page load
    there parsed and compiled Streamlit's and Plotly's scripts again: an Overview load cost 4.3
    core-seconds against 3.5 here (2.7 s of script parsing against 0.7), on a quiet machine."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    context = playwright.chromium.launch_persistent_context(  # type: ignore[attr-defined]
        profile, executable_path=str(ui.CHROMIUM), args=list(ui.CHROMIUM_ARGS), viewport=_TALL,
        accept_downloads=True)
    context.add_init_script(_EMPTY_STORAGE)
    yield context
    context.close()


def _tab(context: object) -> object:
    tab = context.new_page()  # type: ignore[attr-defined]
    dialogs: list[str] = []
    tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    tab.dialogs = dialogs
    return tab


@pytest.fixture()
def page(_warm_context: object) -> Iterator[object]:
    """A new tab at 1400 × 3200 in the light theme, its dialogs collected in `tab.dialogs`, in
    the session's warm context (above: the HTTP cache carries over, no storage and no cookie
    does). A module may define its own `page` in this one's place."""
    _warm_context.clear_cookies()  # type: ignore[attr-defined]
    tab = _tab(_warm_context)
    yield tab
    tab.close()  # type: ignore[attr-defined]
    _warm_context.clear_cookies()  # type: ignore[attr-defined]


@pytest.fixture()
def cold_page(browser: object) -> Iterator[object]:
    """A tab in a fresh context (nothing cached: a first visit), at 1400 × 3200, its dialogs
    collected in `tab.dialogs`."""
    context = browser.new_context(viewport=_TALL, accept_downloads=True)  # type: ignore[attr-defined]
    yield _tab(context)
    context.close()
