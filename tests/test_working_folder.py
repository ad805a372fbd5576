"""The README's two commands, in its order, end green: `make demo`, then `make test`.

`make demo` leaves budgetscope-demo.duckdb in the checkout, and `make test` then failed
`test_dashboard_command_without_a_database` (the CLI rightly names the demo's file when it is
beside it): a test that read the folder it was started from. Every test now runs in an empty
folder of its own (tests/conftest.py); these two tests prove it from the outside.

The README's commands in order, in a copy of this checkout's files (what a fresh clone holds,
with this tree's edits): `make demo` itself, its runtime taken as installed (the checkout's
venv, linked; `make -o` keeps make from reinstalling it into that shared venv), until its
dashboard answers, stopped; then, started from that folder holding the demo's database and a
budgetscope.duckdb beside it (the file every command reads without --db), a representative part
of `make test`: the tests that touch the working folder (those whose file names the default or
the demo's database, or changes folder), the CLI, report and dashboard-page tests beside them,
the layers, the docs' and the ground's checks; they pass there and leave the folder's files as
they were. Not the whole suite again: run from inside `make test` that would double its
minutes, and its other tests read nothing of the working folder (tests/conftest.py keeps it
so).

One test, one nested pytest: the folder tests ran twice before, once from a separate folder
holding a demo database (with a second demo built for it) and again in the clone, which holds
one too; the clone's run now carries the budgetscope.duckdb and the nothing-left-behind check,
and the suite spends one demo load and one nested pytest fewer.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ui

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
# What a test file names when it reads or writes the working folder.
_TOUCHES_THE_FOLDER = re.compile(r"budgetscope-demo\.duckdb|budgetscope\.duckdb|DEMO_DB|"
                                 r"DEFAULT_DB|no database|chdir")
FAST = "not browser and not slow and not root and not network"
# Beside the folder tests, what else `make test` checks that a fresh clone could break.
REPRESENTATIVE = ("tests/test_layers.py", "tests/test_documented.py", "tests/test_doc_links.py",
                  "tests/test_streamlit_ground.py", "tests/test_dashboard_tables.py",
                  "tests/test_cli_messages.py", "tests/test_sql_registry.py")


def folder_tests(root: Path = REPO) -> list[str]:
    """The test files that touch the working folder, relative to `root`."""
    return sorted(str(path.relative_to(root)) for path in (root / "tests").glob("test_*.py")
                  if path.name != Path(__file__).name
                  and _TOUCHES_THE_FOLDER.search(path.read_text(encoding="utf-8")))


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

    tests = sorted({*folder_tests(clone), *REPRESENTATIVE})
    assert "tests/test_dashboard_pages.py" in tests and "tests/test_cli_report.py" in tests
    result = _pytest(clone, clone, tests, tmp_path / "basetemp", PYTHONPATH=str(clone))
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
    assert sorted(path.name for path in clone.iterdir()) == before  # nothing left behind
