"""How long a new run takes to appear while a hostile trace keeps being re-derived, against a
quiet server, in one run.

    .venv/bin/python -m bench.bench_hostile_derivation [--spans 30000] [--seconds 20]

A real receiver with serve's derivation thread, on a fresh file holding one hostile trace: a
chain of `--spans` spans that each carry budget.total_ms (runs nested in runs), the shape that
made every re-derivation walk ~200 rows per run. Then, for `--seconds`, a canary run (three
spans, its root last, as an agent exports it) every 0.5 s over OTLP/HTTP; in the hostile phase
also one exception log record a second into the hostile trace, each of which marks it for
derivation again. Printed: each phase's canary times to appear (from the export's answer to
the run's row), p50 and max, and the hostile/quiet ratio. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.support.hostile import canary, exception_record, hostile_trace, post
from ingest.decode.flatten import flatten_request
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner, SpanWriter
from store.testing import PendingDerivations, refresh_touched

CANARY_EVERY_SECONDS = 0.5


def phase(receivers: Receivers, owner: DatabaseOwner, seconds: float,
          trickle: tuple[bytes, bytes] | None) -> list[float]:
    """Canaries for `seconds` (and the trickle when given); each canary's time to appear."""
    traces = receivers.http_endpoint
    logs = traces.replace("/v1/traces", "/v1/logs")
    stop = threading.Event()

    def trickling() -> None:
        number = 0
        while trickle is not None and not stop.wait(1.0):
            number += 1
            post(logs, exception_record(*trickle, number))

    thread = threading.Thread(target=trickling, daemon=True)
    thread.start()
    sent: dict[str, float] = {}
    appeared: dict[str, float] = {}
    cursor = owner.cursor()
    try:
        ends = time.monotonic() + seconds
        next_canary = time.monotonic()
        while time.monotonic() < ends or len(appeared) < len(sent):
            now = time.monotonic()
            if now < ends and now >= next_canary:
                body, trace_id = canary()
                post(traces, body)
                sent[trace_id] = time.monotonic()
                next_canary += CANARY_EVERY_SECONDS
            waiting = [t for t in sent if t not in appeared]
            if waiting:
                found = cursor.execute("SELECT trace_id FROM runs WHERE trace_id IN "
                                       "(SELECT unnest(?::VARCHAR[]))", [waiting]).fetchall()
                for (trace_id,) in found:
                    appeared[trace_id] = time.monotonic()
            if time.monotonic() > ends + 120:
                break
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join()
        cursor.close()
    return [appeared[t] - sent[t] for t in sent if t in appeared]


def summary(times: list[float]) -> str:
    return (f"{len(times)} canaries, p50 {statistics.median(times):.2f} s, "
            f"max {max(times):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=30_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    owner = DatabaseOwner(folder / "hostile.duckdb")
    request, trace_id, deepest = hostile_trace(args.spans)
    cursor = owner.cursor()
    SpanWriter(cursor).write(flatten_request(request))
    started = time.perf_counter()
    PendingDerivations(refresh_touched).run(cursor)
    print(f"hostile trace: {args.spans:,} spans, each a run nested in the one above; "
          f"one derivation {time.perf_counter() - started:.2f} s")
    cursor.close()
    receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0), derive=True)
    receivers.start()
    try:
        quiet = phase(receivers, owner, args.seconds, None)
        print(f"quiet:   {summary(quiet)}")
        hostile = phase(receivers, owner, args.seconds, (trace_id, deepest))
        print(f"hostile: {summary(hostile)} (one exception record a second into the trace)")
        ratio = statistics.median(hostile) / statistics.median(quiet)
        print(f"ratio hostile/quiet: p50 {ratio:.2f}"
              f"x, max {max(hostile) / max(quiet):.2f}x")
    finally:
        receivers.stop(10)
        owner.close()


if __name__ == "__main__":
    main()
