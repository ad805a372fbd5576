"""The browser and the sample dashboard that the browser test modules share (each module gets
its own, as module-scoped fixtures; a module may override either, as the access tests do)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.browser import support


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=str(support.CHROMIUM),
                                     args=support.CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def sample_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.Dashboard]:
    db = support.sample_db(tmp_path_factory)
    app = support.Dashboard(db, tmp_path_factory.mktemp("logs") / "dashboard.log")
    app.db = db  # type: ignore[attr-defined]
    yield app
    app.stop()
