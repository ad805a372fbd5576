"""Print the spans of a captured fixture as an indented tree (name, kind, status, attributes,
events): for reading what a real instrumentation sent.

    .venv/bin/python -m tests.real_fixtures.show tests/real_fixtures/otlp/httpx.otlp.pb
"""

from __future__ import annotations

import base64
import struct
import sys
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def read_requests(path: Path) -> list[ExportTraceServiceRequest]:
    data = path.read_bytes()
    requests, offset = [], 0
    while offset < len(data):
        (size,) = struct.unpack(">I", data[offset:offset + 4])
        requests.append(ExportTraceServiceRequest.FromString(data[offset + 4:offset + 4 + size]))
        offset += 4 + size
    return requests


def _value(attribute: dict) -> object:
    return next(iter(attribute.get("value", {}).values()), None)


def spans(path: Path) -> list[dict]:
    found = []
    for request in read_requests(path):
        for resource_spans in MessageToDict(request).get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                scope = scope_spans.get("scope", {}).get("name", "")
                for span in scope_spans.get("spans", []):
                    span["scope"] = scope
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = base64.b64decode(span[key]).hex()
                    found.append(span)
    return found


def main() -> None:
    found = spans(Path(sys.argv[1]))
    children: dict[str, list[dict]] = {}
    ids = {span["spanId"] for span in found}
    for span in sorted(found, key=lambda s: int(s["startTimeUnixNano"])):
        parent = span.get("parentSpanId", "")
        children.setdefault(parent if parent in ids else "", []).append(span)

    def show(span: dict, depth: int) -> None:
        start = int(span["startTimeUnixNano"])
        duration = (int(span["endTimeUnixNano"]) - start) / 1e6
        status = span.get("status", {})
        pad = "  " * depth
        print(f"{pad}- {span['name']!r} {span.get('kind', '')} {duration:.1f}ms "
              f"status={status.get('code', 'UNSET')} {status.get('message', '')!r} "
              f"[{span['scope']}]")
        for attribute in span.get("attributes", []):
            text = repr(_value(attribute))
            print(f"{pad}    {attribute['key']} = {text[:150]}")
        for event in span.get("events", []):
            attrs = {a["key"]: _value(a) for a in event.get("attributes", [])}
            attrs.pop("exception.stacktrace", None)
            print(f"{pad}    event {event['name']}: {attrs}")
        for child in children.get(span["spanId"], []):
            show(child, depth + 1)

    for root in children.get("", []):
        print(f"trace {root['traceId']}")
        show(root, 0)


if __name__ == "__main__":
    main()
