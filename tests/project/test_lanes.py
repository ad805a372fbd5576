"""What keeps the suite's lanes and bench/ apart, read from the code's imports:

- no test module imports another test module (a test module is a test_*.py or conftest.py):
  what tests share lives in tests/support/ (27 test files used to import helpers, fixtures
  and constants from each other, so running one file ran the set-up of another);
- bench/ imports nothing from tests/, and tests/ import only bench.support of bench/ (the
  neutral ground both stand on: the dashboard subprocess, raw OTLP requests, ClickHouse
  loaders);
- no file of bench/ edits sys.path: bench/ is a package run as `python -m bench.NAME` from the
  repository's root, and bench/ab.py compares with another revision (25 of 28 files used to
  put the repository, or another checkout, on sys.path themselves).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.lanes import SLOWEST_FIRST
from tests.support.paths import REPO


def _python_files(folder: str) -> list[Path]:
    return sorted(path for path in (REPO / folder).rglob("*.py")
                  if "__pycache__" not in path.parts)


def _imports(path: Path, source: str | None = None) -> Iterator[str]:
    """Every module `path` (or `source` as if it were `path`) imports, as dotted names
    (relative imports resolved; for `from X import Y` both X and X.Y, since Y may be a
    module)."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    text = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _is_test_module(name: str) -> bool:
    last = name.split(".")[-1]
    return name.startswith("tests.") and (last.startswith("test_") or last == "conftest")


def _edits_sys_path(path: Path) -> list[int]:
    """Lines of `path` that touch sys.path (or the site directories) at all."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and ((node.value.id == "sys" and node.attr == "path")
                     or (node.value.id == "site" and node.attr == "addsitedir"))):
            lines.append(node.lineno)
    return lines


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO))


def test_no_test_module_imports_another() -> None:
    found = {_relative(path): sorted({name for name in _imports(path) if _is_test_module(name)})
             for path in _python_files("tests")}
    found = {path: names for path, names in found.items() if names}
    assert not found, ("test modules importing test modules (move what they share to "
                       f"tests/support/): {found}")


def test_bench_imports_nothing_from_tests() -> None:
    found = {_relative(path): sorted({name for name in _imports(path)
                                      if name == "tests" or name.startswith("tests.")})
             for path in _python_files("bench")}
    found = {path: names for path, names in found.items()
             if names}
    assert not found, ("bench/ importing tests/ (move what both need to bench/support/): "
                       f"{found}")


def test_tests_import_only_the_support_of_bench() -> None:
    found = {_relative(path): sorted({
        name for name in _imports(path)
        if (name == "bench" or name.startswith("bench.")) and name != "bench.support"
        and not name.startswith("bench.support.")})
        for path in _python_files("tests")}
    found = {path: names for path, names in found.items() if names}
    assert not found, f"tests importing a benchmark (use bench.support): {found}"


def test_no_bench_file_edits_sys_path() -> None:
    found = {_relative(path): _edits_sys_path(path) for path in _python_files("bench")}
    found = {path: lines for path, lines in found.items()
             if lines}
    assert not found, ("bench/ files editing sys.path (run them as `python -m bench.NAME`; "
                       f"compare revisions with bench/ab.py): lines {found}")


def test_bench_is_a_package() -> None:
    assert (REPO / "bench" / "__init__.py").is_file()
    assert (REPO / "bench" / "support" / "__init__.py").is_file()


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    """A walk that found nothing would pass: the checks recognise an import of a test module,
    relative imports included, and a sys.path edit."""
    assert _is_test_module("tests.browser.test_browser_dashboard")
    assert _is_test_module("tests.browser.conftest")
    assert not _is_test_module("tests.support.ui")
    sample = REPO / "tests" / "browser" / "_lanes_probe.py"  # never written
    names = set(_imports(sample, "from .test_browser_dashboard import page\n"
                                 "from ..support import ui\n"))
    assert "tests.browser.test_browser_dashboard" in names and "tests.support.ui" in names
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nsys.path.insert(0, '.')\n")
    assert _edits_sys_path(probe) == [2]
    receivers_test = REPO / "tests" / "ingest" / "test_receivers_http.py"
    assert "tests.support.receivers" in set(_imports(receivers_test))



def test_the_slowest_files_named_exist() -> None:
    """tests/support/lanes.py's names are files of the suite, each one file whichever wing of
    tests/ holds it: a file renamed there would silently lose its place at the front of `make
    test`'s queue, and a name two folders share would put both there."""
    files = [path.name for path in (REPO / "tests").rglob("test_*.py")]
    assert set(SLOWEST_FIRST) <= set(files), sorted(set(SLOWEST_FIRST) - set(files))
    shared = sorted(name for name in SLOWEST_FIRST if files.count(name) > 1)
    assert not shared, f"names of more than one test file: {shared}"


def test_every_test_module_sits_in_a_wing() -> None:
    """A test module goes in the folder of the wing it tests (CONTRIBUTING.md, "Where a test
    goes"), never flat in tests/."""
    flat = sorted(path.name for path in (REPO / "tests").glob("test_*.py"))
    assert not flat, f"move these into a wing of tests/: {flat}"
