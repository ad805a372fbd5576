"""OTLP/gRPC under a burst: N concurrent Export calls on one channel, what each was answered, and
how long the burst took against the same calls sent one at a time in the same run.

    .venv/bin/python -m bench.bench_grpc_burst                  # 300 calls of 50 spans
    .venv/bin/python -m bench.bench_grpc_burst --calls 1000 --spans 200

Real receivers (default limits: 64 calls in progress) on 127.0.0.1 over a fresh DuckDB file in
this process; the client is another process (grpc.aio, one channel), so that its calls leave
at once. Outcomes are counted as OK, or the status code with whether the status details carry
a RetryInfo (OTLP/gRPC Throttling: only a refusal with it is retried by every OTLP client).
Every call has its own trace ids, so the spans stored are the OK calls' spans exactly.
Figures only, never assertions.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.support.otlp import raw_request
from ingest.receivers.service import ReceiverConfig, Receivers
from store import DatabaseOwner

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_CLIENT = """
import asyncio, json, sys, time
import grpc
from google.rpc import error_details_pb2, status_pb2

def retry_info(error):
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                    return True
    return False

async def main(target, together, bodies):
    async with grpc.aio.insecure_channel(target, options=[
            ("grpc.max_send_message_length", 64 << 20)]) as channel:
        export = channel.unary_unary(sys.argv[2], request_serializer=None,
                                     response_deserializer=None)
        async def one(body):
            try:
                await export(body, timeout=120)
                return "OK"
            except grpc.aio.AioRpcError as error:
                return error.code().name + (" with RetryInfo" if retry_info(error) else
                                            " without RetryInfo")
        started = time.perf_counter()
        if together:
            outcomes = await asyncio.gather(*(one(body) for body in bodies))
        else:
            outcomes = [await one(body) for body in bodies]
        print(json.dumps({"seconds": time.perf_counter() - started, "outcomes": outcomes}))

bodies = [bytes.fromhex(line) for line in sys.stdin.read().split()]
asyncio.run(main(sys.argv[1], sys.argv[3] == "together", bodies))
"""


def _send(target: str, bodies: list[bytes], together: bool) -> dict:
    client = subprocess.run(
        [sys.executable, "-c", _CLIENT, target, EXPORT, "together" if together else "serial"],
        input="\n".join(body.hex() for body in bodies), capture_output=True, text=True,
        timeout=900, check=True)
    return json.loads(client.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--spans", type=int, default=50, help="spans per call")
    args = parser.parse_args()
    # One warning line per refused call would bury the figures.
    logging.getLogger("budgetscope.receivers").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bench-grpc-burst-") as folder:
        owner = DatabaseOwner(Path(folder) / "burst.duckdb")
        receivers = Receivers(owner, ReceiverConfig(http_port=0, grpc_port=0))
        receivers.start()
        try:
            target = receivers.grpc_endpoint
            _send(target, [raw_request(args.spans).SerializeToString()], together=False)  # warm
            print(f"{args.calls} Export calls of {args.spans} spans, one channel, "
                  f"{receivers.config.limits.max_requests} calls admitted at once")
            for label, together in (("one at a time", False), ("all at once", True)):
                bodies = [raw_request(args.spans).SerializeToString()
                          for _ in range(args.calls)]
                before = _count(owner)
                answer = _send(target, bodies, together)
                time.sleep(0.5)
                stored = _count(owner) - before
                counts = collections.Counter(answer["outcomes"])
                shown = ", ".join(f"{name} {count}" for name, count in counts.most_common())
                print(f"{label:<14} {answer['seconds']:7.2f} s  {shown}; spans stored "
                      f"{stored:,} (= OK x {args.spans}: {stored == counts['OK'] * args.spans})")
                if not together:
                    baseline = answer["seconds"]
                else:
                    print(f"all at once / one at a time: {answer['seconds'] / baseline:.2f}x")
        finally:
            receivers.stop(30)
            owner.close()


def _count(owner: DatabaseOwner) -> int:
    cursor = owner.cursor()
    try:
        return int(cursor.execute("SELECT count(*) FROM spans").fetchone()[0])
    finally:
        cursor.close()


if __name__ == "__main__":
    main()
