"""What the dashboard tests share: the sample traces in a DuckDB file (built once per test
session, through the same loader and derivation hook as `budgetscope ingest`), a database of
hostile span names, and the dashboard as a real subprocess on a free port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from budgetscope.config import SAMPLE_TRACES
from ingest.files.loader import load_files
from store import connect
from tests.trace_builder import TraceBuilder, store

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
SETTLE_TIMEOUT_MS = 90_000

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "dashboard" / "streamlit_app.py"
# Two ISO weeks of the sample (W47 and W48), so that the overview has a previous period too.
SINCE, UNTIL = "2026-11-16", "2026-11-30"
HOSTILE_IMG = "<img src=x onerror=alert(1)>"
HOSTILE_LINK = "[click](javascript:alert(1))"
HOSTILE_AGENT = "<script>alert(2)</script>"
# Debian's Chromium, never a downloaded build, and the flags every browser test launches it with
# (headless, and nothing that would call out of the machine).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync")


def _build_once(path: Path, build) -> str:  # type: ignore[no-untyped-def]
    """Build `path` unless an earlier test of this session already did (a marker file is
    written last, so that a half-built database from an interrupted build is rebuilt)."""
    done = path.with_suffix(".done")
    if not done.exists():
        for stale in (path, Path(f"{path}.wal")):
            stale.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        con = connect(path)
        try:
            build(con)
        finally:
            con.close()
        done.write_text("ok")
    return str(path)


def sample_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not SAMPLE_TRACES.exists():
        pytest.skip(f"{SAMPLE_TRACES} is not there yet")

    def build(con):  # type: ignore[no-untyped-def]
        summary = load_files(con, [SAMPLE_TRACES],
                             derive=True)
        assert not summary.rejections

    return _build_once(tmp_path_factory.getbasetemp() / "dashboard" / "sample.duckdb", build)


def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One exhausted run whose agent, steps, tool names and keys are HTML and Markdown."""

    def build(con):  # type: ignore[no-untyped-def]
        b = TraceBuilder(seed=99)
        run = b.span("agent run", 0, 12_000, attributes={
            "budget.total_ms": 10_000, "budget.run.outcome": "exhausted",
            "gen_ai.agent.name": HOSTILE_AGENT})
        b.step(run, "tool", HOSTILE_IMG, 0, 8_000)
        b.step(run, "tool", HOSTILE_LINK, 8_000, 12_000, **{
            "budget.side_effect": "write", "budget.effect_status": "possible",
            "budget.idempotency_key": HOSTILE_IMG, "budget.outcome": "client_timeout"})
        store(con, b.finished())

    return _build_once(tmp_path_factory.getbasetemp() / "dashboard" / "hostile.duckdb", build)


def settle(tab: object, charts: int = 0, pause_ms: int = 500,
           timeout_ms: int = SETTLE_TIMEOUT_MS) -> None:
    """Wait until the page in `tab` has drawn (PAGE_DRAWN) with `charts` charts, then `pause_ms`
    more (a rerun the page asked for, such as a URL it rewrote, starts within it), and fail if
    the page shows an exception."""
    tab.wait_for_function(PAGE_DRAWN, arg=charts, timeout=timeout_ms)  # type: ignore[attr-defined]
    if pause_ms:
        tab.wait_for_timeout(pause_ms)  # type: ignore[attr-defined]
    exception = tab.locator('[data-testid="stException"]')  # type: ignore[attr-defined]
    assert exception.count() == 0, exception.first.inner_text()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Dashboard:
    """`budgetscope dashboard` in a subprocess, stopped with SIGTERM."""

    def __init__(self, db: str, log: Path, refresh_seconds: float | None = None,
                 extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 checkout: Path = REPO) -> None:
        """`env` adds to the process's environment; `checkout` is the copy of budgetscope whose
        code runs (a benchmark's other commit, bench_dashboard.py --against)."""
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
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dashboard exited: {log.read_text(errors='replace')}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as reply:
                    if reply.read() == b"ok":
                        return
            except OSError:
                time.sleep(0.3)
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
