"""Where the test suite's time goes: CPU per test file and per test, beside the whole machine's.

    .venv/bin/python -m bench.bench_suite_cpu [--files 20] [--tests 20] -- PYTEST_ARGS...

e.g. `-- -q -m "not browser" -n 2 --dist loadfile --no-loadscope-reorder` (the non-browser lane
as `make test` runs it) or `-- -q -m browser`. CI is CPU-bound on 2 cores (its two lanes run side
by side), so a test's CPU, not its wall time, is what it costs CI.

pytest runs in a child with bench/support/cpu_per_test.py as a plugin, which records each test's
CPU (its process and the children it reaped) and wall time. Printed: the run's wall time; the
machine's busy core-seconds over it (/proc/stat: run it on a quiet machine); the tests' counted
core-seconds, whose gap to the machine's is CPU that no test reaped (the browser lane's Chromium
renderers, a server a module started once, pytest's own collection); then the files and the
tests that cost the most.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.support.cpu_per_test import LOG_ENV

ROOT = Path(__file__).resolve().parents[1]


def machine_busy_seconds() -> float:
    """Busy core-seconds since boot: user, nice, system, irq, softirq and steal of /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20, help="files listed (by CPU)")
    parser.add_argument("--tests", type=int, default=20, help="tests listed (by CPU)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER,
                        help="after --: what pytest is given")
    options = parser.parse_args()
    pytest_args = [a for a in options.pytest_args if a != "--"] or ["-q"]
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "cpu.tsv"
        log.touch()
        busy, wall = machine_busy_seconds(), time.monotonic()
        finished = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "bench.support.cpu_per_test",
             "-p", "no:cacheprovider", *pytest_args],
            cwd=ROOT, env={**os.environ, LOG_ENV: str(log)}, stdout=subprocess.DEVNULL)
        busy, wall = machine_busy_seconds() - busy, time.monotonic() - wall
        rows = [line.split("\t", 2) for line in log.read_text(encoding="utf-8").splitlines()]
    tests = sorted(((float(cpu), float(spent), node) for cpu, spent, node in rows), reverse=True)
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for cpu, spent, node in tests:
        entry = by_file[node.split("::", 1)[0]]
        entry[0] += cpu
        entry[1] += spent
        entry[2] += 1
    counted = sum(cpu for cpu, _, _ in tests)
    print(f"pytest exit {finished.returncode}; {len(tests)} tests; wall {wall:.1f} s; machine "
          f"busy {busy:.1f} core-s; tests counted {counted:.1f} core-s "
          f"({busy - counted:.1f} reaped by no test)")
    print(f"\n{'core-s':>8} {'wall s':>8} {'tests':>6}  file")
    for name, (cpu, spent, count) in sorted(by_file.items(), key=lambda i: -i[1][0])[
            :options.files]:
        print(f"{cpu:8.1f} {spent:8.1f} {count:6d}  {name}")
    print(f"\n{'core-s':>8} {'wall s':>8}  test")
    for cpu, spent, node in tests[:options.tests]:
        print(f"{cpu:8.2f} {spent:8.2f}  {node}")


if __name__ == "__main__":
    main()
