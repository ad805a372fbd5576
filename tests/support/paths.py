"""The checkout's root, for a test in any folder of tests/: name the repository's files from it
(`REPO / "docs" / "metrics.md"`), never from the test's own folder, which changes when tests move
between wings, nor from the working folder, an empty one of each test's own (tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_temp(basetemp: Path) -> Path:
    """The temporary folder the whole run shares, from a process's basetemp: under pytest-xdist
    each worker has its own (<run>/popen-gwN), beside its fellows'; a run without has one."""
    return basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp
