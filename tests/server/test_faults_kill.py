"""kill -9 at random moments during a sustained stream, repeated: after every kill the
file left behind opens cleanly and holds every span acknowledged so far exactly once (checked on a
copy, so that the next restart still replays the original), serve restarts on it each time, and
at the end every acknowledged span is present exactly once.

The stream: three raw OTLP/HTTP clients, one raw gRPC client and the OpenTelemetry SDK's own
OTLP/HTTP exporter, all against one `budgetscope serve` process. tests/long/kill_loop.py runs
the same rounds many more times.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.support.kill import kill_rounds

KILLS_IN_CI = 3


@pytest.mark.slow
def test_repeated_kill_9_loses_and_duplicates_no_acknowledged_span(tmp_path: Path) -> None:
    seed = int(os.environ.get("BUDGETSCOPE_KILL_SEED", random.randrange(1 << 30)))
    report = kill_rounds(tmp_path, KILLS_IN_CI, seed)
    print("\n" + "\n".join(report.lines()))
    assert report.missing == 0, report.lines()
    assert report.duplicates == 0, report.lines()
    assert report.stored >= report.acknowledged + 1
