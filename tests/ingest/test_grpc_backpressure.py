"""OTLP/gRPC over its concurrency: every call refused for load is UNAVAILABLE with RetryInfo,
at any concurrency (OTLP/gRPC Throttling), so that every OTLP client retries it. grpc's own
`maximum_concurrent_rpcs` answered RESOURCE_EXHAUSTED without RetryInfo, which clients other
than the Python SDK drop: 300 concurrent exports on one channel got 166 of those.

Real receivers on 127.0.0.1 over a real database; the writer is held inside a commit (the
Gate hook) so that admitted calls stay in progress while the others arrive; a raw stub on one
channel sends 300 calls at once. The receivers admit 8 calls here rather than 64, so that the
burst passes any limit by far whatever the machine's pace (with grpc's limiter, as many
threads as that plus 16 answered, and the rest of a burst was RESOURCE_EXHAUSTED)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest.receivers.limits import Limits
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner
from tests.support.receivers import Gate, Running, raw_request

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
CALLS = 300
SPANS = 3
ADMITTED = 8


@contextmanager
def _receivers(folder: Path, gate: Gate):  # type: ignore[no-untyped-def]
    owner = DatabaseOwner(folder / "grpc.duckdb")
    # The writer's own lag refusal stays out of the way: the count of calls is what refuses.
    receivers = Receivers(owner, ReceiverConfig(
        http_port=0, grpc_port=0, limits=Limits(max_requests=ADMITTED), max_lag_seconds=60))
    receivers.committer.writer.after_write = gate
    receivers.start()
    try:
        yield Running(owner, receivers)
    finally:
        receivers.stop(10)
        owner.close()


# The client: another process, so that its 300 calls leave at once (grpc.aio, one channel)
# rather than at the pace of a loop sharing the server's interpreter. It prints each call's
# outcome: OK, or the status code and the RetryInfo delay of its details (None without one).
_CLIENT = """
import asyncio, json, sys
import grpc
from google.rpc import error_details_pb2, status_pb2

def delay(error):
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                retry = error_details_pb2.RetryInfo()
                if detail.Unpack(retry):
                    return retry.retry_delay.seconds
    return None

async def main(target, bodies):
    async with grpc.aio.insecure_channel(target) as channel:
        export = channel.unary_unary(sys.argv[2], request_serializer=None,
                                     response_deserializer=None)
        async def one(body):
            try:
                await export(body, timeout=60)
                return "OK"
            except grpc.aio.AioRpcError as error:
                return f"{error.code().name} retry={delay(error)}"
        print(json.dumps(await asyncio.gather(*(one(body) for body in bodies))))

bodies = [bytes.fromhex(line) for line in sys.stdin.read().split()]
asyncio.run(main(sys.argv[1], bodies))
"""


@pytest.mark.slow
def test_300_concurrent_exports_are_answered_ok_or_unavailable_with_retry_info(
        tmp_path: Path) -> None:
    gate = Gate()
    bodies = "\n".join(raw_request(SPANS).SerializeToString().hex() for _ in range(CALLS))
    with _receivers(tmp_path, gate) as server:
        with grpc.insecure_channel(server.grpc_target) as channel:
            export = channel.unary_unary(
                EXPORT, request_serializer=None,
                response_deserializer=ExportTraceServiceResponse.FromString)
            first = export.future(raw_request(SPANS).SerializeToString(), timeout=60)
            assert gate.entered.wait(10)  # the writer is inside the first commit
            client = subprocess.Popen([sys.executable, "-c", _CLIENT, server.grpc_target,
                                       EXPORT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True)
            client.stdin.write(bodies)  # type: ignore[union-attr]
            client.stdin.close()  # type: ignore[union-attr]
            counters = server.receivers.counters
            # Released once every call beyond the slots is refused (within a second here),
            # or after 10 s: the admitted calls must be committed within the commit timeout.
            deadline = time.monotonic() + 10
            while counters.snapshot()["requests_refused"].get(("grpc", "unavailable"), 0) < \
                    CALLS - ADMITTED and client.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            gate.release.set()
            first.result()
            out = client.stdout.read()  # type: ignore[union-attr]
            assert client.wait(120) == 0
        count = server.count()
    outcomes: list[str] = json.loads(out)
    assert len(outcomes) == CALLS
    assert set(outcomes) <= {"OK", "UNAVAILABLE retry=1"}, sorted(set(outcomes))
    # The first call and the admitted ones fill the slots; every other is refused.
    assert outcomes.count("UNAVAILABLE retry=1") >= CALLS - ADMITTED, outcomes
    assert count == (1 + outcomes.count("OK")) * SPANS
