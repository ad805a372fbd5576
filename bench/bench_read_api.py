"""What a command costs through a running serve's read API (POST /cli) beside the same command
on the file, in the same run: the median of --repeat calls of each, and their ratio.

    .venv/bin/python -m bench.bench_read_api                 # the bundled sample, loaded first
    .venv/bin/python -m bench.bench_read_api --db FILE       # an existing database (copied)

Both sides run in this process through click (the interpreter's start-up, the same for both, is
left out): "file" opens a copy of the database as the command does when nobody serves it;
"server" is the CLI finding that another copy is held by a real `budgetscope serve` subprocess
and asking it. The outputs are compared byte for byte on every call. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from budgetscope.cli import cli
from budgetscope.config import SAMPLE_TRACES
from store import connect, serve_sidecar_path

ROOT = Path(__file__).resolve().parent.parent

TOKEN = "bench-read-api-token"


def _invoke(db: Path, arguments: list[str]) -> tuple[float, bytes, int]:
    started = time.perf_counter()
    result = CliRunner().invoke(cli, ["--db", str(db), *arguments], prog_name="budgetscope",
                                env={"BUDGETSCOPE_TOKEN": TOKEN, "BUDGETSCOPE_SERVER": None})
    return time.perf_counter() - started, result.stdout_bytes, result.exit_code


def _start_serve(db: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-c", "from budgetscope.cli import main; main()", "--db", str(db),
         "serve", "--no-ui", "--otlp-http-port", "0", "--otlp-grpc-port", "0",
         "--token", TOKEN], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ})
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
    parser.add_argument("--db", type=Path, help="a database to copy (default: load the sample)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-read-api-"))
    direct, served = folder / "file.duckdb", folder / "served.duckdb"
    if args.db:
        shutil.copyfile(args.db, direct)
    else:
        CliRunner().invoke(cli, ["--db", str(direct), "ingest", "--no-progress",
                                 str(SAMPLE_TRACES)])
    con = connect(direct)
    spans, run_id = con.execute("SELECT (SELECT count(*) FROM spans), "
                                "(SELECT min(run_id) FROM runs WHERE exhausted)").fetchone()
    con.close()
    shutil.copyfile(direct, served)
    process = _start_serve(served)
    commands = [["report", "weekly"], ["report", "runs", "--format", "table"],
                ["report", "attribution", "--format", "json"], ["run", str(run_id)],
                ["check", "--max-exhaustion-rate", "0.05", "--window", "60d",
                 "--until", "2026-12-01"],
                ["simulate", "--cap", "fetch_report=9s"]]
    print(f"{spans:,} spans; median of {args.repeat} calls after one untimed call each")
    print(f"{'command':<44} {'file ms':>9} {'server ms':>10} {'server/file':>12}")
    try:
        for arguments in commands:
            _invoke(direct, arguments), _invoke(served, arguments)  # warm both
            on_file, on_server = [], []
            for _ in range(args.repeat):
                seconds, out_file, code_file = _invoke(direct, arguments)
                on_file.append(seconds)
                seconds, out_server, code_server = _invoke(served, arguments)
                on_server.append(seconds)
                if (out_file, code_file) != (out_server, code_server):
                    raise SystemExit(f"{' '.join(arguments)}: outputs differ")
            file_ms = statistics.median(on_file) * 1e3
            server_ms = statistics.median(on_server) * 1e3
            print(f"{' '.join(arguments):<44} {file_ms:>9.1f} {server_ms:>10.1f} "
                  f"{server_ms / file_ms:>11.2f}x")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
