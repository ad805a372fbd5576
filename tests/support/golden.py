"""Golden files (tests/golden/): a report's bytes compared with the file kept for it.
Regenerate them with BUDGETSCOPE_UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import os

from tests.support.paths import REPO

GOLDEN = REPO / "tests" / "golden"
UPDATE = os.environ.get("BUDGETSCOPE_UPDATE_GOLDEN") == "1"


def check_golden(name: str, data: bytes) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_bytes(data)
    assert path.exists(), f"{path} missing: run with BUDGETSCOPE_UPDATE_GOLDEN=1"
    assert data == path.read_bytes(), f"{name} differs from its golden file"
