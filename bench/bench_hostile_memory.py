"""Peak memory of `budgetscope serve` for the largest hostile shapes a body limit lets through:
a 60 MB array or kvlist attribute, 60 MB of events or links on one span, a 60 MB span name or
attribute key (a 60 MB array drove the server to 1.3 GB and DuckDB out of
memory, answered 503, so exporters retried it for ever).

    .venv/bin/python -m bench.bench_hostile_memory [--mb 60] [--shapes array-protobuf ...]

Starts `serve --no-ui` on a fresh database for each shape, POSTs one body, and prints the HTTP
status, the seconds to answer, the server's peak resident memory (VmHWM) and its baseline
(after one small request), and what was stored. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from store import connect, serve_sidecar_path

CLI = [sys.executable, "-c", "from budgetscope.cli import main; main()"]
NOW = time.time_ns() - 60 * 10**9


def _request(index: int) -> tuple[ExportTraceServiceRequest, Span]:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    service = resource_spans.resource.attributes.add()
    service.key, service.value.string_value = "service.name", "hostile"
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id = index.to_bytes(16, "big")
    span.span_id = index.to_bytes(8, "big")
    span.name = "hostile"
    span.start_time_unix_nano, span.end_time_unix_nano = NOW, NOW + 10**9
    return request, span


def _elements(megabytes: int, per_element: int) -> int:
    return megabytes * 1_000_000 // per_element


def array(megabytes: int) -> ExportTraceServiceRequest:
    request, span = _request(2)
    attribute = span.attributes.add()
    attribute.key = "big.array"
    values = attribute.value.array_value.values
    for _ in range(_elements(megabytes, 12)):  # an 8-character string: 12 bytes on the wire
        values.add().string_value = "abcdefgh"
    return request


def kvlist(megabytes: int) -> ExportTraceServiceRequest:
    request, span = _request(3)
    attribute = span.attributes.add()
    attribute.key = "big.kvlist"
    values = attribute.value.kvlist_value.values
    for index in range(_elements(megabytes, 18)):
        entry = values.add()
        entry.key, entry.value.int_value = f"k{index}", 1
    return request


def events(megabytes: int) -> ExportTraceServiceRequest:
    request, span = _request(4)
    for _ in range(_elements(megabytes, 20)):
        event = span.events.add()
        event.name, event.time_unix_nano = "tick", NOW
    return request


def links(megabytes: int) -> ExportTraceServiceRequest:
    request, span = _request(5)
    for index in range(_elements(megabytes, 30)):
        link = span.links.add()
        link.trace_id, link.span_id = (index + 1).to_bytes(16, "big"), b"\x01" * 8
    return request


def attributes(megabytes: int) -> ExportTraceServiceRequest:
    request, span = _request(6)
    for index in range(_elements(megabytes, 16)):
        attribute = span.attributes.add()
        attribute.key, attribute.value.int_value = f"a{index}", 1
    return request


def long_name(megabytes: int) -> ExportTraceServiceRequest:
    request, span = _request(7)
    span.name = "n" * (megabytes * 1_000_000 // 2)
    attribute = span.attributes.add()
    attribute.key, attribute.value.int_value = "k" * (megabytes * 1_000_000 // 2), 1
    return request


SHAPES: dict[str, tuple[Callable[[int], ExportTraceServiceRequest], str]] = {
    "array-protobuf": (array, "protobuf"), "array-json": (array, "json"),
    "kvlist-protobuf": (kvlist, "protobuf"), "events-protobuf": (events, "protobuf"),
    "links-protobuf": (links, "protobuf"), "attributes-protobuf": (attributes, "protobuf"),
    "name-and-key-protobuf": (long_name, "protobuf"),
}


def _json(request: ExportTraceServiceRequest) -> bytes:
    from google.protobuf.json_format import MessageToDict

    document = MessageToDict(request)
    for resource_spans in document["resourceSpans"]:  # OTLP JSON ids are hex
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for field in ("traceId", "spanId"):
                    span[field] = __import__("base64").b64decode(span[field]).hex()
                for link in span.get("links", []):
                    for field in ("traceId", "spanId"):
                        link[field] = __import__("base64").b64decode(link[field]).hex()
    return json.dumps(document, separators=(",", ":")).encode()


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024  # MB
    return 0


def _post(url: str, body: bytes, content_type: str) -> int:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except urllib.error.URLError:
        return 0  # the server closed the connection before answering


def measure(shape: str, megabytes: int) -> str:
    build, encoding = SHAPES[shape]
    # OTLP JSON spells each element out (~27 bytes for a 12-byte protobuf string element):
    # build fewer so that the body is about `megabytes` too.
    request = build(megabytes if encoding == "protobuf" else megabytes * 2 // 5)
    body = (_json(request) if encoding == "json" else request.SerializeToString())
    small, _ = _request(1)
    content_type = "application/json" if encoding == "json" else "application/x-protobuf"
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "hostile.duckdb"
        process = subprocess.Popen([*CLI, "--db", str(db), "serve", "--no-ui",
                                    "--otlp-http-port", "0", "--otlp-grpc-port", "0"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            announced = None
            while time.monotonic() < deadline and announced is None:
                try:
                    found = json.loads(serve_sidecar_path(db).read_text())
                    announced = found if found.get("pid") == process.pid else None
                except (OSError, ValueError):
                    time.sleep(0.1)
            assert announced is not None, "serve did not start"
            url = announced["otlp_http"]
            _post(url, small.SerializeToString(), "application/x-protobuf")
            baseline = _status(process.pid, "VmRSS")
            Path(f"/proc/{process.pid}/clear_refs").write_text("5")  # reset VmHWM
            started = time.monotonic()
            status = _post(url, body, content_type)
            seconds = time.monotonic() - started
            peak = _status(process.pid, "VmHWM")
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
        con = connect(db, read_only=True)
        try:
            row = con.execute(
                "SELECT count(*), max(length(attributes)), max(len(events)), max(len(links)),"
                " max(dropped_attributes_count), max(dropped_events_count),"
                " max(dropped_links_count), max(length(name)) FROM spans").fetchone()
        finally:
            con.close()
    return (f"{shape:24} body {len(body) / 1e6:6.1f} MB  status {status}  {seconds:6.1f} s  "
            f"peak RSS {peak:5d} MB (baseline {baseline} MB)  stored spans {row[0]}, "
            f"attributes JSON {row[1]} chars, events {row[2]}, links {row[3]}, dropped "
            f"attributes/events/links {row[4]}/{row[5]}/{row[6]}, name {row[7]} chars")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=60)
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    args = parser.parse_args()
    print(f"pid {os.getpid()}, {args.mb} MB bodies (serve's --max-body-bytes is 64 MiB)")
    for shape in args.shapes:
        print(measure(shape, args.mb), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
