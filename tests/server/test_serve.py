"""`budgetscope serve` as a real process: it owns the file, other commands say so at once,
SIGTERM stops it cleanly, and kill -9 loses nothing that was acknowledged."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest

from store import connect, serve_sidecar_path
from tests.support.receivers import raw_request
from tests.support.serve import (
    CLI,
    START_TIMEOUT,
    post,
    start_serve,
    stop,
    stored,
    stream_grpc,
    stream_http,
)


@pytest.mark.slow
def test_serve_owns_the_file_names_itself_and_stops_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "served.duckdb"
    process, announced = start_serve(db, "--no-ui")
    try:
        assert post(announced["otlp_http"], raw_request(7).SerializeToString()) == 200
        trace_file = tmp_path / "trace.json"
        trace_file.write_text("{}")
        # Started together: each must fail on its own, never wait for the lock (the server
        # keeps the file until the test ends, so a waiting command runs into the timeout).
        others = [subprocess.Popen([*CLI, "--db", str(db), *arguments], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
                  # (report and run used to be refused too; they now go to the server's
                  # read API: tests/cli/test_cli_server.py)
                  for arguments in (["ingest", str(trace_file)],
                                    ["retain", "--days", "1"])]
        for other in others:
            _, stderr = other.communicate(timeout=60)
            assert other.returncode != 0
            message = stderr.strip()
            assert "\n" not in message and "Traceback" not in message, message
            assert f"budgetscope serve (pid {process.pid})" in message
            assert announced["otlp_http"] in message and announced["otlp_http"].startswith(
                "http://127.0.0.1:") and announced["otlp_http"].endswith("/v1/traces")
    finally:
        code, out, err = stop(process)
    assert code == 0, err
    assert "listening on 127.0.0.1 only" in out and announced["otlp_http"] in out
    assert not serve_sidecar_path(db).exists()
    assert stored(db) == 7


@pytest.mark.slow
def test_kill_9_loses_no_acknowledged_span(tmp_path: Path) -> None:
    db = tmp_path / "crash.duckdb"
    process, announced = start_serve(db, "--no-ui")
    acknowledged: list[tuple[str, str]] = []
    stop_sending = threading.Event()
    clients = [threading.Thread(target=stream_http, args=(announced["otlp_http"], acknowledged,
                                                      stop_sending)) for _ in range(3)]
    clients.append(threading.Thread(target=stream_grpc, args=(
        announced["otlp_grpc"], acknowledged, stop_sending)))
    for client in clients:
        client.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 2_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    # Mid-stream: requests are in flight (some decoded, some queued, one committing).
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    stop_sending.set()
    for client in clients:
        client.join(60)
    acked = list(acknowledged)  # every thread has stopped appending
    assert len(acked) >= 500, "the stream never got going"
    assert serve_sidecar_path(db).exists()  # a kill leaves it behind: restart must cope

    # Restart the server on the crashed file (DuckDB replays its WAL), then stop it cleanly.
    process, announced = start_serve(db, "--no-ui")
    assert post(announced["otlp_http"], raw_request(1).SerializeToString()) == 200
    code, _, err = stop(process)
    assert code == 0, err

    con = connect(db)
    try:
        con.register("acked", pa.table({"trace_id": [t for t, _ in acked],
                                        "span_id": [s for _, s in acked]}))
        missing = con.execute(
            "SELECT count(*) FROM acked a ANTI JOIN spans s USING (trace_id, span_id)"
        ).fetchone()[0]
        total = con.execute("SELECT count(*) FROM spans").fetchone()[0]
    finally:
        con.close()
    assert missing == 0, f"{missing} of {len(acked)} acknowledged spans lost"
    assert total >= len(acked) + 1  # plus spans committed but not yet answered at the kill


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_serve_runs_the_dashboard_in_the_same_process(tmp_path: Path) -> None:
    db = tmp_path / "ui.duckdb"
    ui_port = _free_port()
    process, announced = start_serve(db, "--ui-port", str(ui_port), token="from-env-token-0123")
    try:
        assert announced["dashboard"] == f"http://127.0.0.1:{ui_port}"
        deadline = time.monotonic() + START_TIMEOUT
        health = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/_stcore/health",
                                            timeout=5) as response:
                    health = response.read()
                    break
            except OSError:
                time.sleep(0.2)
        assert health == b"ok"
        # With --token the dashboard wants it too: here as a Bearer header.
        page = urllib.request.Request(f"http://127.0.0.1:{ui_port}/",
                                      headers={"Authorization": "Bearer from-env-token-0123"})
        with urllib.request.urlopen(page, timeout=10) as response:
            assert response.status == 200 and b"<html" in response.read().lower()
        # The receivers keep working beside it, with the token taken from the environment.
        body = raw_request(3).SerializeToString()
        assert post(announced["otlp_http"], body) == 401
        assert post(announced["otlp_http"], body, token="from-env-token-0123") == 200
    finally:
        code, out, err = stop(process)
    assert "bearer token required" in out
    assert code == 0, err
    assert not serve_sidecar_path(db).exists()
    assert stored(db) == 3
    assert os.path.exists(db)
