"""The README's two commands, in its order, end green from a fresh clone: `make demo`, then
the test command.

`make demo` leaves budgetscope-demo.duckdb in the checkout, and `make test` then failed
`test_dashboard_command_without_a_database` (the CLI rightly names the demo's file when it is
beside it): a test that read the folder it was started from. Every test now runs in an empty
folder of its own (tests/conftest.py); this test proves it from the outside.

In a copy of this checkout's files (what a fresh clone holds, with this tree's edits): `make
demo` itself, its runtime taken as installed (the checkout's venv, linked; `make -o` keeps make
from reinstalling it into that shared venv), until its dashboard answers, stopped; then,
started from that folder holding the demo's database and a budgetscope.duckdb beside it (the
file every command reads without --db), the test command on a small set that stands for the
suite (SMALL_SUITE): a store test, CLI tests that name the working folder's files (the demo's
file beside a missing database), an AppTest page on a missing database, and the dashboard
command whose test first broke here. They pass there and leave the folder's files as they were.

Why a small set and not the 20 modules that touch the working folder, as before: CI (`.ci/run`)
is itself a fresh clone running the whole suite, so every one of those tests already runs from
a fresh clone there, and a second nested pytest of them made this the suite's costliest test
(1,468 s at load 18). What only this test shows is that the README's commands run in order
from a clone and that a demo's files in the folder change no test's result: the set above
exercises each way a test could read the folder (the CLI's default database, the demo's file
beside it, a page opened on no database) and each layer the command runs (store, CLI, pages).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ui
from tests.support.paths import REPO

pytestmark = pytest.mark.slow

FAST = "not browser and not slow and not root and not network"
# The test command's small set (see the docstring): node ids, each of which must still exist.
SMALL_SUITE = (
    # the store: a database file opened, migrated and read back
    "tests/store/test_schema_migration.py::test_version_1_is_migrated_and_keeps_every_span_unique",
    # the CLI, on the database every command reads without --db and beside the demo's file
    "tests/cli/test_cli_report.py::test_missing_database",
    "tests/cli/test_cli_report.py::test_no_database_names_the_demos_file_when_it_is_here",
    # a page under AppTest, and the dashboard command, on a database that is not there
    "tests/dashboard/test_dashboard_pages.py::test_empty_database_explains_how_to_send_data",
    "tests/dashboard/test_dashboard_pages.py::test_dashboard_command_without_a_database",
)
# What SMALL_SUITE runs (the page's test is parametrized: a missing and an empty database).
SMALL_SUITE_TESTS = 6


def _environment(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("BUDGETSCOPE_", "PYTEST_"))}
    return {**env, **extra}


def _pytest(cwd: Path, root: Path, tests: list[str], basetemp: Path, **env: str
            ) -> subprocess.CompletedProcess[str]:
    """pytest on `tests` (relative to `root`) started from `cwd`; its temporary folders under
    `basetemp`, apart from this session's (pytest prunes older numbered ones)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", FAST,
         "--rootdir", str(root), f"--basetemp={basetemp}",
         *(str(root / test) for test in tests)],
        cwd=cwd, capture_output=True, text=True, timeout=1800, env=_environment(**env))


def _checkout_copy(target: Path) -> Path:
    """The files `git ls-files` lists, as this tree holds them: a fresh clone with this
    tree's edits (untracked files left out, as a clone would)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                            timeout=60)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: nothing to clone")
    for name in listed.stdout.decode().split("\0"):
        source = REPO / name
        if name and source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def test_make_demo_then_make_test_in_a_fresh_clone(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("needs make, as the README's commands do")
    clone = _checkout_copy(tmp_path / "clone")
    venv = REPO / ".venv"
    (clone / ".venv").symlink_to(venv)
    port = ui.free_port()
    # The clone's code, not the checkout's: the venv's editable install finds the
    # checkout's packages after whatever PYTHONPATH names first.
    env = _environment(PYTHONPATH=str(clone))
    demo = subprocess.Popen(
        ["make", "-o", ".venv/.runtime-installed", "demo", f"PORT={port}"], cwd=clone,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True)
    try:
        served = ui.wait_until_served(f"http://127.0.0.1:{port}", demo, 300)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGTERM)  # make and the dashboard it started
        output = demo.communicate(timeout=60)[0]
    assert served, output
    assert f"http://127.0.0.1:{port}" in output
    assert (clone / "budgetscope-demo.duckdb").exists()

    # The file every command reads without --db, beside the demo's.
    shutil.copyfile(clone / "budgetscope-demo.duckdb", clone / "budgetscope.duckdb")
    before = sorted(path.name for path in clone.iterdir())

    for test in SMALL_SUITE:
        assert (clone / test.split("::")[0]).is_file(), f"{test}: its file moved"
    result = _pytest(clone, clone, list(SMALL_SUITE), tmp_path / "basetemp",
                     PYTHONPATH=str(clone))
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert f"{SMALL_SUITE_TESTS} passed" in result.stdout, result.stdout[-3000:]
    assert " failed" not in result.stdout and " deselected" not in result.stdout
    assert sorted(path.name for path in clone.iterdir()) == before  # nothing left behind
