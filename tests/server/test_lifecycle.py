"""Every owner of a thread has one shape (store/lifecycle.py): `start()`, `stop()` that asks the
thread to end, `join(timeout)` that says whether it did, and `name`, the thread's.

Each owner is made on a temporary DuckDB file (the receivers on 127.0.0.1, free ports), started,
and its named thread seen running; `join` says it has not ended; `stop()` twice, and `join` says
it has, and the thread is gone. What each finishes before it ends (a batch queued, a slice of
retention) is checked too. A walk of the product finds every class that keeps a thread, so a new
owner fails here until it has its test.
"""

from __future__ import annotations

import ast
import http.client
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from ingest.decode.flatten import flatten_request
from ingest.receivers.service import ReceiverConfig, Receivers
from store import (
    DERIVE,
    BackgroundWriter,
    DatabaseOwner,
    FlatBatch,
    GroupCommitter,
    RetentionSchedule,
    SpanWriter,
    connect,
)
from store.testing import DAY_NS, Lifecycle
from tests.support.paths import REPO
from tests.support.trace_builder import T0_NS, TraceBuilder

# Generous: a thread asked to stop here ends in milliseconds; a loaded machine may take longer.
ENDS_WITHIN = 30.0
# Every class of the product (and the SDK) that keeps a thread, and where.
OWNERS = {
    ("store/write/commit_loop.py", "CommitLoop"),
    ("store/write/derive_thread.py", "DerivationThread"),
    ("store/write/background_writer.py", "BackgroundWriter"),
    ("store/retention/passes.py", "RetentionSchedule"),
    ("ingest/receivers/http_receiver.py", "HttpReceiver"),
    ("ingest/receivers/grpc_receiver.py", "GrpcReceiver"),
}
FOLDERS = ("budgetscope", "dashboard", "simulation", "queries", "ingest", "store",
           "sample_traces", "sdk/budgetscope_sdk")


def _keeps_a_thread(node: ast.ClassDef) -> bool:
    """Whether the class assigns a `threading.Thread(...)` to an attribute of its own."""
    for assign in ast.walk(node):
        if isinstance(assign, ast.Assign | ast.AnnAssign) and isinstance(assign.value, ast.Call):
            call = assign.value.func
            named = call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")
            targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
            if named == "Thread" and any(isinstance(t, ast.Attribute) for t in targets):
                return True
    return False


@pytest.mark.slow
def test_the_walk_finds_every_owner_of_a_thread() -> None:
    found = {(path.relative_to(REPO).as_posix(), node.name)
             for folder in FOLDERS for path in sorted((REPO / folder).rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.ClassDef) and _keeps_a_thread(node)}
    assert found == OWNERS, ("classes that keep a thread: give a new one store/lifecycle.py's "
                             "shape and a test here")


def _thread_named(name: str, before: set[threading.Thread]) -> threading.Thread:
    """The one thread called `name` started since `before` was taken."""
    (thread,) = [t for t in set(threading.enumerate()) - before if t.name == name]
    return thread


def _started(owner: Lifecycle) -> threading.Thread:
    before = set(threading.enumerate())
    owner.start()
    return _thread_named(owner.name, before)


def _stops(owner: Lifecycle, thread: threading.Thread) -> None:
    """`owner` has the shape; running, it has not ended; asked twice to stop, it has."""
    assert isinstance(owner, Lifecycle)
    assert thread.name == owner.name and owner.name.startswith("budgetscope-")
    assert thread.is_alive() and owner.join(0.05) is False
    owner.stop()
    owner.stop()  # a second call changes nothing
    assert owner.join(ENDS_WITHIN) is True
    assert not thread.is_alive()
    assert owner.join(0) is True


def _batch(seed: int, t0_ns: int = T0_NS) -> FlatBatch:
    """One run of two spans from `t0_ns` on, made by the OpenTelemetry SDK."""
    builder = TraceBuilder(seed)
    run = builder.span("agent run", 0, 1_000, attributes={"budget.total_ms": 2_000},
                       t0_ns=t0_ns)
    builder.span("llm chat", 100, 600, parent=run, t0_ns=t0_ns,
                 attributes={"budget.step.kind": "llm", "budget.step.name": "chat"})
    return flatten_request(encode_spans(builder.finished()))


def test_the_group_commits_writer_and_derivation(tmp_path: Path) -> None:
    """The writer and the derivation beside it, started by the group commit: stopping the
    writer commits what is queued, then stops the derivation after its last turn."""
    con = connect(tmp_path / "writer.duckdb")
    before = set(threading.enumerate())
    committer = GroupCommitter(con, derive=DERIVE, derive_every_seconds=3_600)
    writer, derivation = committer.threads
    threads = [_thread_named(owner.name, before) for owner in (writer, derivation)]
    committed = committer.submit(_batch(1))
    _stops(writer, threads[0])
    assert committed.done() and committed.result().inserted == 2
    # the writer asked the derivation for its last turn as it ended
    assert derivation.join(ENDS_WITHIN) and not threads[1].is_alive()
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)
    con.close()


def test_the_derivation_stops_on_its_own_request(tmp_path: Path) -> None:
    con = connect(tmp_path / "derive.duckdb")
    before = set(threading.enumerate())
    committer = GroupCommitter(con, derive=DERIVE, derive_every_seconds=3_600)
    writer, derivation = committer.threads
    _stops(derivation, _thread_named(derivation.name, before))
    assert committer.close(ENDS_WITHIN)
    assert writer.join(0) is True
    con.close()


def test_the_background_writer(tmp_path: Path) -> None:
    """It commits every batch submitted before stop() before its thread ends."""
    con = connect(tmp_path / "load.duckdb")
    background = BackgroundWriter(SpanWriter(con))
    assert background.join(0) is True  # never started: nothing to wait for
    thread = _started(background)
    background.submit(_batch(1))
    background.submit(_batch(2))
    _stops(background, thread)
    assert background.inserted == 4
    assert con.execute("SELECT count(*) FROM spans").fetchone() == (4,)
    con.close()


def test_retention_ends_between_passes_and_logs_under_its_name(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Its first pass runs at once, then it waits an hour for the next: stop() ends the wait.
    What the pass logs carries the thread's name (logging's %(threadName)s)."""
    path = tmp_path / "retained.duckdb"
    con = connect(path)
    now_ns = time.time_ns()
    SpanWriter(con).write(_batch(1, now_ns - 40 * DAY_NS))  # older than 30 days: removed
    SpanWriter(con).write(_batch(2, now_ns - DAY_NS))
    committer = GroupCommitter(con)
    schedule = RetentionSchedule(committer.run_in_writer, 30, str(path), interval=3_600)
    with caplog.at_level(logging.INFO, logger="budgetscope.retention"):
        thread = _started(schedule)
        while schedule.passes == 0 and thread.is_alive():  # the first pass has finished
            thread.join(0.05)
        _stops(schedule, thread)
    assert schedule.passes == 1 and schedule.traces_removed == 1
    (record,) = [r for r in caplog.records if getattr(r, "event", None) == "retention"]
    assert record.threadName == schedule.name
    assert committer.close(ENDS_WITHIN)
    assert con.execute("SELECT count(*) FROM spans").fetchone() == (2,)
    con.close()


def _listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=ENDS_WITHIN).close()
    except ConnectionRefusedError:
        return False
    return True


@contextmanager
def _receivers(tmp_path: Path) -> Iterator[Receivers]:
    owner = DatabaseOwner(tmp_path / "receivers.duckdb")
    receivers = Receivers(owner, ReceiverConfig(host="127.0.0.1", http_port=0, grpc_port=0))
    try:
        yield receivers
    finally:
        receivers.stop(ENDS_WITHIN)  # what is left of both, and the writer
        owner.close()


def test_the_otlp_http_receiver(tmp_path: Path) -> None:
    """It answers an export while started; once joined, its port is closed."""
    with _receivers(tmp_path) as receivers:
        receiver = receivers.http
        thread = _started(receiver)
        client = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=ENDS_WITHIN)
        client.request("POST", "/v1/traces", body=b"",
                       headers={"Content-Type": "application/x-protobuf"})
        assert client.getresponse().status == 200  # an empty request: nothing to store
        client.close()
        _stops(receiver, thread)
        assert receiver.drained is True and not _listens(receiver.port)


def test_the_otlp_http_receiver_never_started(tmp_path: Path) -> None:
    """Stopped before it starts (serve failing to bind its gRPC port): its port is closed at
    once, and there is no thread to wait for."""
    with _receivers(tmp_path) as receivers:
        receiver = receivers.http
        assert _listens(receiver.port)  # bound at construction: the kernel queues connections
        receiver.stop(0)
        assert receiver.join(0) is True and receiver.drained is True
        assert not _listens(receiver.port)


def test_the_otlp_grpc_receiver(tmp_path: Path) -> None:
    """Its loop's thread runs from construction (grpc.aio binds on its running loop);
    `start()` starts serving."""
    before = set(threading.enumerate())
    with _receivers(tmp_path) as receivers:
        grpc = receivers.grpc
        thread = _thread_named(grpc.name, before)
        grpc.start()
        assert _listens(grpc.port)
        _stops(grpc, thread)
        assert not _listens(grpc.port)
