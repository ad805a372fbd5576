"""Files a run builds once and every process of it reads: built by the first of the run's
pytest-xdist workers to need one, under a lock (the other waits, no longer than its own build
would take), then copied into each process's own basetemp, so that no two processes ever open
one file. In a run without xdist the process's basetemp is the run's."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.paths import run_temp


def built_once_a_run(factory: pytest.TempPathFactory, name: str,
                     build: Callable[[Path], None]) -> Path:
    """This process's copy of the file `name` as `build(path)` writes it (a file that does not
    exist yet), built once in the run. A marker is written after the build, so that a file
    half built by an interrupted or failed build is built again."""
    base = factory.getbasetemp()
    mine = base / "built-once" / name
    if not _done(mine).exists():
        shared = run_temp(base) / "built-once-a-run" / name
        shared.parent.mkdir(parents=True, exist_ok=True)
        with _lock(shared).open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
            if not _done(shared).exists():
                for stale in (shared, Path(f"{shared}.wal")):
                    stale.unlink(missing_ok=True)
                build(shared)
                _done(shared).write_text("ok")
        if shared != mine:
            mine.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shared, mine)
            _done(mine).write_text("ok")
    return mine


def _done(path: Path) -> Path:
    return path.with_name(f"{path.name}.done")


def _lock(path: Path) -> Path:
    return path.with_name(f"{path.name}.lock")
