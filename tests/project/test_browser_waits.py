"""The browser tests wait on conditions, never on fixed sleeps: a page drawn (ui.settle), a text
shown, an address reached, a number of script runs finished. A fixed sleep is too short on a
loaded machine and too long on a quiet one, and a test that only sleeps waits on nothing that
can fail. This reads the code of the browser tests and of their support and fails on:

- `page.wait_for_timeout(...)` in tests/browser/ or a tests/support/ module they import;
- `time.sleep(...)` (or a `sleep` imported from time) in tests/browser/ or tests/support/ui.py;
- in the other tests/support/ modules the browser tests import (a `budgetscope serve` they
  start, …), a sleep that is not the pause between the checks of a polling loop (a `while`
  loop, which ends on its condition or its deadline).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO

BROWSER = REPO / "tests" / "browser"
SUPPORT = REPO / "tests" / "support"
# The browser tests' own support: no sleep at all.
BROWSER_SUPPORT = (SUPPORT / "ui.py",)


def _sleep_names(tree: ast.Module) -> set[str]:
    """The names a module calls `time.sleep` by: `time.sleep`, and `sleep` when imported."""
    names = {"time.sleep"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            names.update(alias.asname or alias.name for alias in node.names
                         if alias.name == "sleep")
    return names


def _called(node: ast.Call) -> str:
    return ast.unparse(node.func)


def fixed_waits(path: Path, polling_allowed: bool, root: Path = REPO) -> list[str]:
    """`path:line: call` (path relative to `root`) for every fixed wait in the module at
    `path`, in line order."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    sleeps = _sleep_names(tree)
    in_while: set[int] = set()
    for loop in ast.walk(tree):
        if isinstance(loop, ast.While):
            in_while.update(id(node) for node in ast.walk(loop))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _called(node)
        if called.endswith("wait_for_timeout") or (
                called in sleeps and not (polling_allowed and id(node) in in_while)):
            found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno}: "
                                       f"{ast.unparse(node)}"))
    return [line for _, line in sorted(found)]


def test_browser_tests_never_sleep() -> None:
    modules = sorted(BROWSER.rglob("*.py"))
    assert len(modules) >= 10, modules  # the scan reads the browser tests, not an empty folder
    found = [wait for path in [*modules, *BROWSER_SUPPORT]
             for wait in fixed_waits(path, polling_allowed=False)]
    assert found == [], "fixed waits in the browser tests:\n" + "\n".join(found)


def support_imported(modules: list[Path]) -> list[Path]:
    """The tests/support/ modules that `modules` import."""
    names = set()
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "tests.support":
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "tests.support."):
                names.add(node.module.split(".")[2])  # type: ignore[union-attr]
    return sorted(SUPPORT / f"{name}.py" for name in names)


def test_their_support_sleeps_only_between_polls() -> None:
    imported = support_imported(sorted(BROWSER.rglob("*.py")))
    assert SUPPORT / "ui.py" in imported and SUPPORT / "serve.py" in imported, imported
    found = [wait for path in imported if path not in BROWSER_SUPPORT
             for wait in fixed_waits(path, polling_allowed=True)]
    assert found == [], "fixed waits in the browser tests' support:\n" + "\n".join(found)


def test_the_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    """The scan itself: each forbidden form is found, a polling loop's pause is not."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import time\nfrom time import sleep as nap\n"
        "def f(page, ready):\n"
        "    page.wait_for_timeout(500)\n"
        "    time.sleep(1)\n"
        "    nap(2)\n"
        "    while not ready():\n"
        "        time.sleep(0.1)\n", encoding="utf-8")
    strict = fixed_waits(sample, polling_allowed=False, root=tmp_path)
    polling = fixed_waits(sample, polling_allowed=True, root=tmp_path)
    assert [line.split(": ", 1)[1] for line in strict] == [
        "page.wait_for_timeout(500)", "time.sleep(1)", "nap(2)", "time.sleep(0.1)"]
    assert [line.split(": ", 1)[1] for line in polling] == [
        "page.wait_for_timeout(500)", "time.sleep(1)", "nap(2)"]
