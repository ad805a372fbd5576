"""Ingestion while the dashboard's port is flooded with idle connections: export latency (median
and p99) and acknowledged spans/s of a real `budgetscope serve` while another process holds
--flood connections (default 1,000) to its dashboard's port, against the same with none, in one
run (the phases alternate: none, flood, flood, none, ...).

    .venv/bin/python -m bench.bench_idle_dashboard [--seconds 15] [--rounds 2] [--limit 1024]

`serve` runs as a subprocess with its dashboard, its descriptor limit set to --limit (soft and
hard; 0 keeps this shell's), so the flood meets the caps it would meet under systemd's default.
The exporters (a forked process, --exporters threads, keep-alive connections) POST distinct
--spans-span protobuf requests (bench_receivers' payloads) back to back; a 200 means committed.
The flood (another forked process) keeps --flood connections open to the dashboard, half
sending nothing and half a head that never ends, and opens a new one whenever the server
closes one (it closes a connection without a head after 5 s, and the idlest at its cap):
the load an attacker keeps up, not a one-off. Figures only, never assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from bench.bench_receivers import make_payloads
from store import serve_sidecar_path

HALF_HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve(db: Path, ui_port: int, limit: int, log: Path) -> tuple[subprocess.Popen, dict]:
    def limited() -> None:
        if limit:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    process = subprocess.Popen(
        [sys.executable, "-c", "from budgetscope.cli import main; main()", "--db", str(db),
         "serve", "--otlp-http-port", "0", "--otlp-grpc-port", "0", "--ui-port", str(ui_port),
         "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=log.open("wb"), preexec_fn=limited)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            announced = json.loads(serve_sidecar_path(db).read_text())
            if announced.get("pid") == process.pid:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    else:
        process.kill()
        raise SystemExit(f"serve did not start: {log.read_text(errors='replace')}")
    while time.monotonic() < deadline:  # the dashboard's server up too
        with contextlib.suppress(OSError), \
                socket.create_connection(("127.0.0.1", ui_port), timeout=2) as probe:
            probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            if probe.recv(64).startswith(b"HTTP/1.1 200"):
                return process, announced
        time.sleep(0.3)
    process.kill()
    raise SystemExit("the dashboard did not start")


def _send(port: int, bodies: list[bytes], stop_at: float, latencies: list[float]) -> int:
    """One exporter: POST `bodies` in turn on a keep-alive connection until `stop_at`; the
    latency of each 200 appended, the others counted (returned)."""
    refused = 0
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for body in bodies:
        if time.monotonic() > stop_at:
            break
        began = time.perf_counter()
        try:
            connection.request("POST", "/v1/traces", body=body,
                               headers={"Content-Type": "application/x-protobuf"})
            response = connection.getresponse()
            response.read()
        except OSError:
            refused += 1
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            continue
        if response.status == 200:
            latencies.append(time.perf_counter() - began)
        else:
            refused += 1
    connection.close()
    return refused


def _exporters(pipe: Connection, payloads: list[bytes], exporters: int) -> None:
    """Client process: for each (port, seconds) received, send payloads not sent before for
    that long and answer (wall, latencies, refused); None ends it."""
    used = 0
    while (order := pipe.recv()) is not None:
        port, seconds = order
        stop_at = time.monotonic() + seconds
        latencies: list[list[float]] = [[] for _ in range(exporters)]
        refused = [0] * exporters
        mine = payloads[used:]

        def run(worker: int) -> None:
            refused[worker] = _send(port, mine[worker::exporters], stop_at,  # noqa: B023
                                    latencies[worker])  # noqa: B023

        threads = [threading.Thread(target=run, args=(worker,)) for worker in range(exporters)]
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # worker w sent mine[w], mine[w + n], ...: the next phase starts past the furthest
        used += exporters * max(len(done) + missed for done, missed in zip(latencies, refused,
                                                                          strict=True))
        pipe.send((time.perf_counter() - began, latencies, refused))


class _Flood:
    """`count` connections kept open to `port`: a new one for each the server closes."""

    def __init__(self, port: int, count: int) -> None:
        self.port = port
        self.selector = selectors.DefaultSelector()
        self.opened = self.closed = 0
        for index in range(count):
            self.open(index)

    def open(self, index: int) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect(("127.0.0.1", self.port))
        self.selector.register(sock, selectors.EVENT_WRITE, (index, True))
        self.opened += 1

    def turn(self) -> None:
        for key, _ in self.selector.select(timeout=0.2):
            sock: socket.socket = key.fileobj  # type: ignore[assignment]
            index, connecting = key.data
            if connecting:  # connected (or refused): half the flood sends half a head
                with contextlib.suppress(OSError):
                    if index % 2:
                        sock.send(HALF_HEAD)
                self.selector.modify(sock, selectors.EVENT_READ, (index, False))
                continue
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if not data or data.startswith(b"HTTP/"):  # closed, 408 or 503: another one
                self.selector.unregister(sock)
                sock.close()
                self.closed += 1
                self.open(index)

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()


def _flood(pipe: Connection, port: int, count: int) -> None:
    """Flood process: on "start", keep `count` connections open to `port` until "stop", then
    answer (connections opened, closed by the server); "end" ends it."""
    while pipe.recv() == "start":
        flood = _Flood(port, count)
        while not pipe.poll():
            flood.turn()
        pipe.recv()  # "stop"
        flood.close()
        pipe.send((flood.opened, flood.closed))


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="per phase")
    parser.add_argument("--rounds", type=int, default=2,
                        help="pairs of phases (none, flood) in alternating order")
    parser.add_argument("--exporters", type=int, default=4)
    parser.add_argument("--spans", type=int, default=512, help="spans per request")
    parser.add_argument("--flood", type=int, default=1000, help="idle connections held")
    parser.add_argument("--limit", type=int, default=1024,
                        help="serve's descriptor limit (0: this shell's)")
    options = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < options.flood + 256:  # the flood's own sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * options.flood), hard))
    # none, flood, flood, none, none, flood, ...: both see the same neighbours on average
    phases = [phase for round_ in range(options.rounds)
              for phase in (("none", "flood") if round_ % 2 == 0 else ("flood", "none"))]
    count = int(len(phases) * options.seconds * 30_000 / options.spans) + 64
    payloads = make_payloads(count, options.spans)
    print(f"{count} payloads of {options.spans} spans; {options.exporters} exporters; phases "
          f"of {options.seconds:g} s: {', '.join(phases)}; {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f} at the start (other work on this machine)")

    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe()
    client = context.Process(target=_exporters, args=(theirs, payloads, options.exporters))
    client.start()
    del payloads
    ui_port = _free_port()
    flood_pipe, flood_end = context.Pipe()
    flooder = context.Process(target=_flood, args=(flood_end, ui_port, options.flood))
    flooder.start()
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "serve.log"
        process, announced = _serve(Path(folder) / "bench.duckdb", ui_port, options.limit, log)
        try:
            start = json.loads(log.read_text().splitlines()[0])
            print(f"serve: descriptor limit {start.get('descriptor_limit')}, connection caps "
                  f"OTLP/HTTP {start.get('otlp_http_connections')}, OTLP/gRPC "
                  f"{start.get('otlp_grpc_connections')}, dashboard "
                  f"{start.get('dashboard_connections')}")
            results: dict[str, list[tuple[float, list[float], int]]] = {"none": [],
                                                                          "flood": []}
            for phase in phases:
                if phase == "flood":
                    flood_pipe.send("start")
                    time.sleep(2)  # the flood in place before the exports start
                fds = len(os.listdir(f"/proc/{process.pid}/fd"))
                ours.send((announced["http_port"], options.seconds))
                wall, latencies, refused = ours.recv()
                every = [value for worker in latencies for value in worker]
                results[phase].append((wall, every, sum(refused)))
                line = (f"  {phase:<5}: {len(every) * options.spans / wall:,.0f} spans/s, "
                        f"p50 {statistics.median(every) * 1000:.0f} ms, p99 "
                        f"{_percentile(every, 0.99) * 1000:.0f} ms, {sum(refused)} refused; "
                        f"serve holds {fds} descriptors")
                if phase == "flood":
                    flood_pipe.send("stop")
                    opened, closed = flood_pipe.recv()
                    line += f"; the flood opened {opened:,} connections, {closed:,} closed"
                print(line)
            ours.send(None)
            flood_pipe.send("end")
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(120)
            client.join(30)
            flooder.join(30)
        log_size = log.stat().st_size
    print(f"serve's log: {log_size:,} bytes in all")
    summary = {}
    for phase, runs in results.items():
        every = [value for _, values, _ in runs for value in values]
        wall = sum(wall for wall, _, _ in runs)
        summary[phase] = (len(every) * options.spans / wall, statistics.median(every),
                          _percentile(every, 0.99))
    (rate0, p50_0, p99_0), (rate1, p50_1, p99_1) = summary["none"], summary["flood"]
    print(f"without a flood: {rate0:,.0f} spans/s, p50 {p50_0 * 1000:.0f} ms, p99 "
          f"{p99_0 * 1000:.0f} ms")
    print(f"with {options.flood:,} idle connections held at the dashboard: {rate1:,.0f} "
          f"spans/s, p50 {p50_1 * 1000:.0f} ms, p99 {p99_1 * 1000:.0f} ms")
    print(f"flood/none: spans/s {rate1 / rate0:.2f}x, p50 {p50_1 / p50_0:.2f}x, p99 "
          f"{p99_1 / p99_0:.2f}x")


if __name__ == "__main__":
    main()
