"""A pytest plugin for bench/bench_suite_cpu.py: for each test, the CPU of the process that ran
it and of the children it reaped during it (getrusage SELF + CHILDREN), and its wall time,
appended as `cpu<TAB>wall<TAB>nodeid` to the file $BUDGETSCOPE_CPU_LOG. It loads in every
pytest-xdist worker (`-p` is passed on), and each line is one write, so workers can share the
file."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator

import pytest

LOG_ENV = "BUDGETSCOPE_CPU_LOG"


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Setup, call and teardown together: a fixture's cost lands on the test that built it."""
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    line = f"{_cpu_seconds() - cpu:.3f}\t{time.monotonic() - wall:.3f}\t{item.nodeid}\n"
    with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
        log.write(line)
