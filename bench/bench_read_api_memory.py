"""Peak resident memory of `report runs` through a running serve's read API (POST /cli), against
the same command on the file and against the answer's size, on a database of --runs runs
(default 100,000).

    .venv/bin/python -m bench.bench_read_api_memory
    .venv/bin/python -m bench.bench_read_api_memory --runs 1000000 --together 12

The database is the bundled sample (1,800 runs) with its rows of `runs` replicated under new
run and trace ids up to --runs (the runs report reads only `runs`). "file": each command as its
own process on a copy nobody serves, its peak RSS (getrusage: the interpreter, the imports,
DuckDB's own memory and the answer). "server": a real `budgetscope serve --no-ui` subprocess
holds another copy; its peak RSS (VmHWM, reset through /proc/PID/clear_refs before each
command, so this needs the same user or root) while the CLI asks it, beside its RSS before;
"serve+/answer" is that growth over the answer's size (a streamed CSV or JSON report holds a
few thousand rows whatever its size; a command built whole holds its answer several times).
Figures only, never assertions.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from budgetscope.config import SAMPLE_TRACES
from ingest.files.loader import load_files
from store import connect, serve_sidecar_path

# The CLI as a process that reports its own peak RSS (kB) on standard error when it exits.
_CLI = ("import atexit, resource, sys; atexit.register(lambda: print('maxrss', "
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)); "
        "from budgetscope.cli import main; main()")
COMMANDS = [["report", "runs", "--format", "json"],
            ["report", "runs", "--format", "csv"],
            ["report", "runs", "--format", "json", "--limit", "20000"],
            ["report", "runs", "--format", "csv", "--limit", "20000"],
            ["report", "runs", "--format", "json", "--limit", "1"]]



def _build(path: Path, runs: int) -> int:
    con = connect(path)
    try:
        assert not load_files(con, [SAMPLE_TRACES], derive=True).rejections
        base = int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
        copies = -(-runs // base) - 1
        con.execute("CREATE TEMP TABLE base_runs AS SELECT * FROM runs")
        for copy in range(1, copies + 1):
            con.execute("INSERT INTO runs SELECT * REPLACE (md5(run_id || ?::VARCHAR) AS run_id, "
                        "md5(trace_id || ?::VARCHAR) AS trace_id) FROM base_runs",
                        [copy, copy])
        return int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
    finally:
        con.close()


def _cli(db: Path, arguments: list[str]) -> tuple[int, int, int]:
    """(exit status, bytes written, peak RSS in MB) of one CLI process."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("BUDGETSCOPE_SERVER", "BUDGETSCOPE_TOKEN")}
    done = subprocess.run([sys.executable, "-c", _CLI, "--db", str(db), *arguments],
                          capture_output=True, env=env, timeout=1800)
    peak = [line for line in done.stderr.decode().splitlines() if line.startswith("maxrss ")]
    return done.returncode, len(done.stdout), int(peak[-1].split()[1]) // 1024 if peak else -1


def _status_mb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    raise LookupError(field)


def _serve(db: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-c", "from budgetscope.cli import main; main()", "--db", str(db),
         "serve", "--no-ui", "--otlp-http-port", "0", "--otlp-grpc-port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(1200):
        try:
            if json.loads(serve_sidecar_path(db).read_text()).get("pid") == process.pid:
                return process
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    process.kill()
    raise SystemExit("serve did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--together", type=int, default=12,
                        help="also this many answered calls at once through the server")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-read-api-memory-"))
    try:
        direct, served = folder / "file.duckdb", folder / "served.duckdb"
        runs = _build(direct, args.runs)
        shutil.copyfile(direct, served)
        print(f"{runs:,} runs; peak RSS in MB")
        print(f"{'command':<48} {'file':>6} {'serve before':>12} {'serve peak':>10} "
              f"{'serve+':>7} {'serve+/file':>11} {'answer MB':>9} {'serve+/answer':>13}  "
              "status/bytes")
        process = _serve(served)
        try:
            _cli(served, ["report", "weekly"])  # the server's first read, untimed
            for arguments in COMMANDS:
                status, size, on_file = _cli(direct, arguments)
                before = _status_mb(process.pid, "VmRSS")
                Path(f"/proc/{process.pid}/clear_refs").write_text("5")  # resets VmHWM
                served_status, served_size, _ = _cli(served, arguments)
                peak = _status_mb(process.pid, "VmHWM")
                grown = peak - before
                answer = served_size / 1e6
                per_answer = f"{grown / answer:>12.2f}x" if served_size > 1e6 else f"{'-':>13}"
                print(f"{' '.join(arguments):<48} {on_file:>6} {before:>12} {peak:>10} "
                      f"{grown:>7} {grown / on_file:>10.2f}x {answer:>9.1f} {per_answer}  "
                      f"file {status}/{size:,} B, server {served_status}/{served_size:,} B")
            if args.together:
                arguments = COMMANDS[0]
                before = _status_mb(process.pid, "VmRSS")
                Path(f"/proc/{process.pid}/clear_refs").write_text("5")
                with concurrent.futures.ThreadPoolExecutor(args.together) as pool:
                    answers = list(pool.map(lambda _: _cli(served, arguments),
                                            range(args.together)))
                peak = _status_mb(process.pid, "VmHWM")
                statuses = sorted({status for status, _, _ in answers})
                print(f"{args.together} x {' '.join(arguments)} at once through the server: "
                      f"peak {peak} MB, +{peak - before} MB over {before} MB before "
                      f"(exit statuses {statuses}; the pool runs 2 and queues 8, 503 beyond)")
                sizes = sorted({size for _, size, _ in answers})
                print(f"  answers of {', '.join(f'{size:,}' for size in sizes)} B")
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(120)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
