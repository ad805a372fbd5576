"""The suite's lanes (pyproject.toml registers the markers; CONTRIBUTING.md and the Makefile say
which command runs which):

- `browser`: every test under tests/browser/ (headless Chromium), marked here by its folder;
- `slow`: a test that takes seconds on its own (a soak, a ClickHouse rebuild, a long fuzz);
- `root`: a test that mounts a file system or makes a network namespace, which needs root: it is
  skipped, with the reason, for anyone else (CI runs as root, so there it runs);
- `network`: a test that installs from the package registry: skipped, with the reason, when the
  registry does not answer.

`make test-fast` leaves all four out; `make test` (what CI runs) runs everything.

Every test runs in an empty folder of its own (`_a_working_folder_of_its_own`), whatever folder
the suite was started from: after `make demo` the checkout holds budgetscope-demo.duckdb, and
a test that read the caller's folder failed there (the CLI rightly names the demo's file when
it is beside it). tests/project/test_working_folder.py runs the README's two commands in order in a
copy of the checkout, the tests it picks started from that folder, which holds a demo
database.
"""

from __future__ import annotations

import functools
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.lanes import COST_FILE, SLOWEST_FIRST

# Records what the cost tests store as they run, for the ClickHouse parity test of the same run
# (tests/clickhouse/test_conventions_parity.py), which ran them a second time before.
pytest_plugins = ("tests.support.cost_recorder",)

BROWSER = Path(__file__).resolve().parent / "browser"
# Where uv and pip look for packages unless told otherwise.
DEFAULT_INDEX = "https://pypi.org/simple"


@functools.cache
def _registry_unreachable() -> str | None:
    """Why the package registry cannot be used from here, or None when it answers."""
    index = (os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL")
             or os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/")
    if not index.startswith(("http://", "https://")):
        return None  # a local index: nothing to reach
    try:
        with urllib.request.urlopen(f"{index}/setuptools/", timeout=10) as reply:
            reply.read(1)
    except (OSError, urllib.error.URLError) as error:
        return f"needs the package registry ({index}), which did not answer: {error}"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> object:
    """Collect with bytecode writing on, whatever PYTHONDONTWRITEBYTECODE says (these machines
    set it): pytest then keeps each test module as it rewrote its asserts, in __pycache__ beside
    it (a file of its own, named for pytest's version, written whole or not at all, checked
    against the source's mtime and size), instead of rewriting all of them again in every
    process: each xdist worker, each pytest a test starts. `make test`'s $(COMPILE) has compiled
    the project's other modules already; only collection is concerned."""
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = writes


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if BROWSER in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.browser)
    # A stable sort: each file's tests stay together and in their order; the cost tests first,
    # then the slowest files (tests/support/lanes.py says why).
    rank = {name: position for position, name in enumerate(SLOWEST_FIRST)}

    def place(item: pytest.Item) -> tuple[bool, int]:
        name = Path(str(item.path)).name
        return COST_FILE.fullmatch(name) is None, rank.get(name, len(rank))

    items.sort(key=place)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root") is not None and os.geteuid() != 0:
        pytest.skip("needs root (it mounts a file system or makes a network namespace); "
                    "CI runs as root")
    if item.get_closest_marker("network") is not None:
        reason = _registry_unreachable()
        if reason is not None:
            pytest.skip(reason)


# The bundled sample, loaded and derived once a session (ui.sample_db): the one place the suite
# builds it. Read it, never write it; a module that writes or holds the file as a server does
# takes a copy (`sample`, or ui.sample_copy). Building it per module was the suite's largest
# repeated cost (8 s a build on a quiet machine, 35 s on 2 loaded cores).
@pytest.fixture(scope="session")
def sample_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.support import ui

    return ui.sample_db(tmp_path_factory)


# The bundled sample as most dashboard and report tests read it: a copy of sample_file per test
# module (a module may change its copy, e.g. declare budgets), and the same file where the
# dashboard's pages look for it. A module with a database of its own defines its own `db`.
@pytest.fixture(scope="module")
def sample(sample_file: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.support import ui

    return str(ui.sample_copy(tmp_path_factory))


@pytest.fixture()
def db(sample: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BUDGETSCOPE_DB", sample)
    return sample


@pytest.fixture(autouse=True)
def _a_working_folder_of_its_own(tmp_path_factory: pytest.TempPathFactory,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the test in a fresh, empty working folder: no test reads what the caller's folder
    holds (a demo database, a budgetscope.duckdb) or leaves a file in it. Files of the
    checkout are named from its root (Path(__file__)), never relative to the working folder."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
