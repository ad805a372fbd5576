"""`budgetscope serve` at a descriptor limit, and the floods the hostile tests send it.

- `LimitedServe`: the real `budgetscope serve` in a subprocess whose RLIMIT_NOFILE (soft and
  hard) is set before it starts (preexec_fn), so that it cannot raise its soft limit past it;
  its standard output and error go to one file whose size the tests read. With `hog=True`
  the process is started through tests/support/descriptor_hog.py, which, when the test
  creates a file, opens descriptors inside the server until none is left and holds them until
  a second file appears: what a process at its limit looks like to its accept loops.
- `Flood`: N connections from the test to one port, held open, half sending nothing and
  half the first line and one header of a request (a head never finished).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from store import serve_sidecar_path
from tests.support.paths import REPO

CLI = "from budgetscope.cli import main; main()"
HOG = Path(__file__).with_name("descriptor_hog.py")
START_SECONDS = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LimitedServe:
    def __init__(self, db: Path, log: Path, *, limit: int, token: str | None = None,
                 hog: bool = False, extra: tuple[str, ...] = ()) -> None:
        self.db, self.log, self.limit = db, log, limit
        self.ui_port = free_port()
        self.trigger = log.with_suffix(".hog")
        self.release = log.with_suffix(".release")
        env = {key: value for key, value in os.environ.items()
               if not key.startswith("BUDGETSCOPE_")}
        env["PYTHONUNBUFFERED"] = "1"
        if token:
            env["BUDGETSCOPE_TOKEN"] = token
        if hog:
            env["BUDGETSCOPE_TEST_HOG"] = str(self.trigger)
            env["BUDGETSCOPE_TEST_RELEASE"] = str(self.release)
        start = ["-c", CLI] if not hog else [str(HOG)]
        self.process = subprocess.Popen(
            [sys.executable, *start, "--db", str(db), "serve", "--otlp-http-port", "0",
             "--otlp-grpc-port", "0", "--ui-port", str(self.ui_port), *extra],
            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env,
            cwd=REPO,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
        self.announced = self._wait_announced()
        self.http = f"http://127.0.0.1:{self.announced['http_port']}"
        self.grpc = f"127.0.0.1:{self.announced['grpc_port']}"
        self.dashboard = f"http://127.0.0.1:{self.ui_port}"
        self._wait_dashboard()

    def _wait_announced(self) -> dict:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited {self.process.returncode}: "
                                     f"{self.log.read_text(errors='replace')}")
            try:
                announced = json.loads(serve_sidecar_path(self.db).read_text())
            except (OSError, ValueError):
                announced = None
            if announced and announced.get("pid") == self.process.pid:
                return announced
            time.sleep(0.1)
        self.stop()
        raise AssertionError("serve did not start in time")

    def _wait_dashboard(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if get(f"{self.dashboard}/healthz")[0] == 200:
                return
            time.sleep(0.3)
        raise AssertionError(f"no dashboard: {self.log.read_text(errors='replace')}")

    @property
    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def hog(self) -> None:
        """Descriptors taken inside the server until none is left (the hog's marker says
        when)."""
        self.trigger.write_text("now")
        done = self.trigger.with_suffix(".held")
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done.exists(), self.log.read_text(errors="replace")

    def unhog(self) -> None:
        self.release.write_text("now")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def log_bytes(self) -> int:
        return self.log.stat().st_size


def room_for_descriptors(wanted: int) -> None:
    """Raise this process's soft descriptor limit to `wanted` (the floods' and bursts' sockets
    are held by the test itself); skip the test when the hard limit does not allow it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"the test needs {wanted} descriptors and may open {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def get(url: str, headers: dict[str, str] | None = None,
        timeout: float = 10) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                    timeout=timeout) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


class Flood:
    """`count` connections to `port`, held open until `close()`: even ones send nothing, odd
    ones the start of a request head that never ends."""

    def __init__(self, port: int, count: int) -> None:
        self.sockets: list[socket.socket] = []
        for index in range(count):
            sock = socket.socket()
            sock.settimeout(10)
            sock.connect(("127.0.0.1", port))  # completes in the kernel's backlog regardless
            if index % 2:
                with contextlib.suppress(OSError):
                    sock.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            self.sockets.append(sock)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets = []
