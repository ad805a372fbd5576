"""kill -9 `budgetscope serve` at random moments of a sustained stream, and what was lost: the
rounds tests/server/test_faults_kill.py runs a few times and `python -m tests.long.kill_loop` many.

The stream: three raw OTLP/HTTP clients, one raw gRPC client and the OpenTelemetry SDK's own
OTLP/HTTP exporter, all against one `budgetscope serve` process."""

from __future__ import annotations

import random
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from store import connect
from tests.support.receivers import raw_request, sdk_spans
from tests.support.serve import post, start_serve, stop, stream_grpc, stream_http


def _stream_sdk(endpoint: str, acknowledged: list[tuple[str, str]],
                stop_sending: threading.Event) -> None:
    """The SDK exporter sends 20-span batches; a SUCCESS means acknowledged."""
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=5)
    try:
        while not stop_sending.is_set():
            spans = sdk_spans(20, service="sdk-under-kill")
            if exporter.export(spans) == SpanExportResult.SUCCESS:
                acknowledged.extend((format(s.context.trace_id, "032x"),
                                     format(s.context.span_id, "016x")) for s in spans)
            else:
                return  # the server is gone (the exporter retried within its timeout)
    finally:
        exporter.shutdown()


@dataclass
class KillReport:
    seed: int
    kills: int = 0
    acknowledged: int = 0
    stored: int = 0
    duplicates: int = 0
    missing: int = 0
    acked_per_round: list[int] = field(default_factory=list)
    acked_by_sdk: int = 0  # of `acknowledged`, through the OpenTelemetry SDK's exporter
    restart_seconds: list[float] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"seed {self.seed}: {self.kills} kill -9s, {self.acknowledged:,} spans "
                f"acknowledged (per round {self.acked_per_round}; {self.acked_by_sdk:,} by the "
                f"SDK exporter), {self.stored:,} stored, "
                f"{self.missing} missing, {self.duplicates} duplicated",
                "restart to ready (s): " + ", ".join(f"{s:.1f}" for s in
                                                     self.restart_seconds)]


def _compare(con: duckdb.DuckDBPyConnection, acknowledged: list[tuple[str, str]]
             ) -> tuple[int, int, int]:
    """(missing acknowledged spans, stored spans, duplicated spans)."""
    con.register("acked", pa.table({"trace_id": [t for t, _ in acknowledged],
                                    "span_id": [s for _, s in acknowledged]}))
    missing = con.execute("SELECT count(*) FROM (SELECT DISTINCT * FROM acked) a "
                          "ANTI JOIN spans s USING (trace_id, span_id)").fetchall()[0][0]
    stored, distinct = con.execute(
        "SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans").fetchall()[0]
    con.unregister("acked")
    return missing, stored, stored - distinct


def _check_copy(db: Path, scratch: Path, acknowledged: list[tuple[str, str]]
                ) -> tuple[int, int]:
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    for source in (db, Path(f"{db}.wal")):
        if source.exists():
            shutil.copy2(source, scratch / source.name)
    con = connect(scratch / db.name)  # replays the copied WAL
    try:
        missing, _, duplicates = _compare(con, acknowledged)
    finally:
        con.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return missing, duplicates


def kill_rounds(folder: Path, kills: int, seed: int) -> KillReport:
    """Start serve, stream from five clients, SIGKILL at a random moment; `kills` times. Then
    restart once more, stop cleanly, and compare the database with what was acknowledged."""
    rng = random.Random(seed)
    db = folder / "killed.duckdb"
    report = KillReport(seed)
    acknowledged: list[tuple[str, str]] = []
    for _ in range(kills):
        started = time.monotonic()
        process, announced = start_serve(db, "--no-ui")
        report.restart_seconds.append(time.monotonic() - started)
        round_acked: list[tuple[str, str]] = []
        sdk_acked: list[tuple[str, str]] = []
        stop_sending = threading.Event()
        clients = [threading.Thread(target=stream_http, args=(announced["otlp_http"], round_acked,
                                                          stop_sending)) for _ in range(3)]
        clients.append(threading.Thread(target=stream_grpc, args=(
            announced["otlp_grpc"], round_acked, stop_sending)))
        clients.append(threading.Thread(target=_stream_sdk, args=(
            announced["otlp_http"], sdk_acked, stop_sending)))
        for client in clients:
            client.start()
        # A random moment: after a random number of acknowledged spans, plus a random
        # fraction of a second, so the kill lands anywhere in decode, queue, commit or answer.
        target = rng.randrange(200, 2_500)
        deadline = time.monotonic() + 60
        while len(round_acked) < target and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.random() * 0.3)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        stop_sending.set()
        for client in clients:
            client.join(60)
        assert not any(client.is_alive() for client in clients), "a client hung"
        report.kills += 1
        report.acked_per_round.append(len(round_acked) + len(sdk_acked))
        report.acked_by_sdk += len(sdk_acked)
        acknowledged += round_acked + sdk_acked
        assert len(round_acked) >= 100, "the stream never got going"
        # What the killed process left, opened as a copy (the original goes on to the next
        # restart unreplayed): it opens, and holds everything acknowledged so far, once.
        missing, duplicates = _check_copy(db, folder / "after-kill", acknowledged)
        assert (missing, duplicates) == (0, 0), (report.kills, missing, duplicates)

    # The last restart replays the WAL of the last kill; it must start and take spans.
    started = time.monotonic()
    process, announced = start_serve(db, "--no-ui")
    report.restart_seconds.append(time.monotonic() - started)
    assert post(announced["otlp_http"], raw_request(1).SerializeToString()) == 200
    code, _, err = stop(process)
    assert code == 0, err

    con = connect(db)  # opens cleanly: schema checked, WAL replayed
    try:
        report.missing, report.stored, report.duplicates = _compare(con, acknowledged)
    finally:
        con.close()
    report.acknowledged = len(set(acknowledged))
    return report
