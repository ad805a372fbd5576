"""The dashboard as a benchmark or a test meets it: `budgetscope dashboard` as a real subprocess
on a free port, the Chromium that drives it, and when a page counts as drawn (the one measure the
browser tests wait for and bench_dashboard times)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A JavaScript function of n for `wait_for_function(CHARTS_DRAWN, arg=n)`: true once n charts are
# drawn. A chart counts once Plotly has put its SVG in its own container; each chart holds two
# `.main-svg` (Plotly's paper and top paper), so counting those let a page through with half its
# charts drawn (on a loaded machine [failures] counted 2 of 3 and [simulate] 1 of 2).
CHARTS_DRAWN = ("(n) => [...document.querySelectorAll('.js-plotly-plot')]"
                ".filter(chart => chart.querySelector('.main-svg')).length >= n")
# The same for the whole page: its script run is over, no element still shows the skeleton that
# Streamlit draws while the element's code loads (or a spinner), and n charts are drawn. The
# script state alone reads "notRunning" before the page has drawn: a first visit of Runs showed
# it at 1.2 s with 20 skeletons and none of its widgets, drawn at 1.7 s.
PAGE_DRAWN = ("(n) => !!document.querySelector('[data-test-script-state=notRunning]')"
              " && !document.querySelector('[data-testid=stSkeleton], [data-testid=stSpinner]')"
              f" && ({CHARTS_DRAWN})(n)")
# Debian's Chromium, never a downloaded build, and the flags every browser test launches it with
# (headless, and nothing that would call out of the machine).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_served(url: str, process: subprocess.Popen, seconds: float) -> bool:
    """Whether Streamlit's server at `url` answered its health probe ("ok", the one address of
    its URL layout that dashboard/server/ground.py lists for probes) within `seconds`, while
    `process` kept running; False when the process ended or the time ran out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.read() == b"ok":
                    return True
        except OSError:
            time.sleep(0.3)
    return False


class Dashboard:
    """`budgetscope dashboard` in a subprocess, stopped with SIGTERM."""

    def __init__(self, db: str, log: Path, refresh_seconds: float | None = None,
                 extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 checkout: Path = ROOT) -> None:
        """`env` adds to the process's environment; `checkout` is the copy of budgetscope whose
        code runs (a benchmark's other commit, bench_dashboard --against)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        for name in ("BUDGETSCOPE_DB", "BUDGETSCOPE_TOKEN", "BUDGETSCOPE_ALLOWED_HOSTS"):
            env.pop(name, None)
        # `python -c` puts its working directory first on sys.path: the checkout's packages.
        start = "from budgetscope.cli import main; main()"
        self.process = subprocess.Popen(
            [sys.executable, "-c", start,
             "--db", db, "dashboard", "--port", str(self.port),
             *([] if refresh_seconds is None else ["--refresh-seconds", str(refresh_seconds)]),
             *extra_args],
            stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=checkout, env=env)
        if wait_until_served(self.url, self.process, 90):
            return
        if self.process.poll() is not None:
            raise RuntimeError(f"dashboard exited: {log.read_text(errors='replace')}")
        self.stop()
        raise RuntimeError(f"dashboard did not start: {log.read_text(errors='replace')}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
