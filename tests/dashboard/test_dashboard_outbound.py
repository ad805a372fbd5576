"""With `--host 0.0.0.0`, starting the dashboard (alone or inside `serve`) makes no outbound
connection attempt: Streamlit's banner used to connect a UDP socket to 8.8.8.8 for
a "Network URL" and ask checkip.amazonaws.com for an "External URL"; usage statistics are off.

Listening on 0.0.0.0 here would expose a server beyond 127.0.0.1, so the command runs inside
a private network namespace (`unshare -n`, which holds only its own loopback): whatever it
tries cannot leave, and tests/support/outbound_probe.py records every attempt anyway. The browser's
side (favicon, fonts) is tests/browser/test_browser_access.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ui import REPO, TOKEN, tiny_db

PORT = 8765  # inside the namespace nothing else listens


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not _namespaces_work(),
                                 reason="needs `unshare -n` (root) for a private network")]


def _probe(tmp_path: Path, *command: str, paths: str, ws: str = "") -> tuple[str, str]:
    log = tmp_path / "outbound.log"
    inner = [sys.executable, "-m", "tests.support.outbound_probe", str(log),
             f"http://127.0.0.1:{PORT}", "--", *command]
    result = subprocess.run(
        ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *inner],
        capture_output=True, text=True, cwd=REPO, timeout=180,
        env={"PATH": "/usr/bin:/bin", "PROBE_PATHS": paths, "PROBE_WS": ws,
             "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    return (log.read_text() if log.exists() else ""), result.stdout


def test_dashboard_on_all_interfaces_calls_nobody(tmp_path: Path) -> None:
    db = tiny_db(tmp_path / "t.duckdb")
    # The websocket's Origin spells the host in capitals: the guard admits it (same origin),
    # Streamlit's own check then used to ask for this machine's internal and external IP.
    attempts, out = _probe(tmp_path, "--db", db, "dashboard", "--host", "0.0.0.0",
                           "--port", str(PORT), "--token", TOKEN,
                           "--allowed-host", "dash.internal",
                           paths=f"/,/?token={TOKEN},/_stcore/host-config",
                           ws=f"dash.internal http://DASH.internal:{PORT} {TOKEN}")
    assert f"http://0.0.0.0:{PORT}" in out  # it did start, on every interface
    assert attempts == "", attempts


def test_serve_on_all_interfaces_calls_nobody(tmp_path: Path) -> None:
    db = tiny_db(tmp_path / "t.duckdb")
    attempts, out = _probe(tmp_path, "--db", db, "serve", "--host", "0.0.0.0",
                           "--ui-port", str(PORT), "--otlp-http-port", "0",
                           "--otlp-grpc-port", "0", "--token", TOKEN,
                           paths=f"/,/?token={TOKEN}")
    assert "reachable from other machines" in out
    assert attempts == "", attempts
