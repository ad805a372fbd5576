"""kill -9 `budgetscope serve` at random moments of a sustained stream, many times over, then
check every acknowledged span is stored exactly once (the rounds of
tests/server/test_faults_kill.py).

    .venv/bin/python -m tests.long.kill_loop --kills 20 --seed 7
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from tests.support.kill import kill_rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="budgetscope-kill-") as folder:
        report = kill_rounds(Path(folder), args.kills, args.seed)
    print("\n".join(report.lines()))
    print(f"{time.monotonic() - started:.0f} s in all")
    failed = report.missing or report.duplicates
    print("FAILED: acknowledged spans lost or duplicated" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
