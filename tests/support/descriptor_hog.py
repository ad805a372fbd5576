"""`budgetscope` run as a script, with a thread that, on request, takes every descriptor the
process has left and holds them until released: the tests' way to put a real server at its
descriptor limit (tests/support/flood.py, `LimitedServe(hog=True)`), so that each accept loop
meets EMFILE as it would when something else in the process used them up.

The thread watches two files named by the environment: BUDGETSCOPE_TEST_HOG (take them;
writes `<that file>.held` once none is left) and BUDGETSCOPE_TEST_RELEASE (give them back).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _hog(trigger: Path, release: Path) -> None:
    while not trigger.exists():
        time.sleep(0.05)
    held: list[int] = []
    # Opened first (none is left after), renamed when done (a rename needs no descriptor).
    writing = trigger.with_suffix(".holding")
    marker = writing.open("w")
    while True:
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            break
    marker.write(str(len(held)))
    marker.close()
    held.append(os.open(os.devnull, os.O_RDONLY))  # the marker's, taken back at once
    writing.rename(trigger.with_suffix(".held"))
    while not release.exists():
        time.sleep(0.05)
    for fd in held:
        os.close(fd)


if __name__ == "__main__":
    threading.Thread(target=_hog, args=(Path(os.environ["BUDGETSCOPE_TEST_HOG"]),
                                        Path(os.environ["BUDGETSCOPE_TEST_RELEASE"])),
                     name="descriptor-hog", daemon=True).start()
    from budgetscope.cli import main

    sys.argv[0] = "budgetscope"
    main()
