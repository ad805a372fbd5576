"""Spans made by the real OpenTelemetry SDK, encoded by its own OTLP encoder, written in every
file form `budgetscope ingest` reads. Shared by the ingest tests."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

T0 = 1_795_000_000_000_000_000  # 2026-11-18T…Z, in ns: a fixed past instant


def sdk_spans(runs: int = 3, service: str = "research-agent") -> list[ReadableSpan]:
    """A few runs with everything OTLP can carry: typed attributes, events, links, error status,
    kinds, nested children."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service,
                                                        "deployment.environment": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("budgetscope.tests", "1.0")
    for run in range(runs):
        start = T0 + run * 60_000_000_000
        root = tracer.start_span("invoke_agent research-agent", start_time=start, attributes={
            "budget.total_ms": 30_000, "budget.reserve_ms": 2_000,
            "budget.run.outcome": "exhausted" if run % 2 else "completed",
            "gen_ai.agent.name": "research-agent", "gen_ai.operation.name": "invoke_agent",
        })
        context = _context(root)
        write = tracer.start_span("execute_tool create_ticket", context=context,
                                  kind=SpanKind.CLIENT, start_time=start + 1_000_000_000,
                                  attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_ticket",
            "budget.cap_ms": 5_000, "budget.allocated_ms": 5_000, "budget.remaining_ms": 29_000,
            "budget.side_effect": "write", "budget.effect_status": "possible",
            "budget.idempotency_key": f"key-{run}", "budget.attempt": 1, "budget.hedge": False,
            "http.response.status_code": 504, "score": 0.25, "tags": ["a", "b"],
        })
        write.add_event("exception", {"exception.type": "TimeoutError",
                                      "exception.message": "deadline 5s"},
                        timestamp=start + 6_000_000_000)
        write.set_status(Status(StatusCode.ERROR, "timed out"))
        write.end(end_time=start + 6_000_000_000)
        reconcile = tracer.start_span(
            "reconcile create_ticket", context=context, start_time=start + 6_500_000_000,
            links=[Link(write.get_span_context(), {"link.reason": "reconcile"})],
            attributes={"budget.step.kind": "reconcile", "budget.idempotency_key": f"key-{run}",
                        "budget.reconcile.result": "landed", "rpc.grpc.status_code": 0})
        reconcile.end(end_time=start + 7_000_000_000)
        model = tracer.start_span("chat gpt-x", context=context, start_time=start + 7_000_000_000,
                                  attributes={"gen_ai.operation.name": "chat",
                                              "gen_ai.request.model": "gpt-x",
                                              "rpc.response.status_code": "UNAVAILABLE"})
        model.end(end_time=start + 9_500_000_000)
        root.end(end_time=start + 10_000_000_000)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _context(span: Any) -> Any:
    from opentelemetry import trace

    return trace.set_span_in_context(span)


def request(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    return encode_spans(spans)


def _hex_ids(node: Any) -> Any:
    """proto3 JSON writes bytes as base64; OTLP JSON writes trace and span ids as hex."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                out[key] = base64.b64decode(value).hex()
            else:
                out[key] = _hex_ids(value)
        return out
    if isinstance(node, list):
        return [_hex_ids(item) for item in node]
    return node


def otlp_json(message: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP JSON as the Collector writes it: hex ids, integer enums, int64 as strings."""
    return _hex_ids(MessageToDict(message, use_integers_for_enums=True))


def varint(value: int) -> bytes:
    """`value` as a protobuf varint, for writing wire bytes by hand in tests."""
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def length_prefixed(messages: list[ExportTraceServiceRequest]) -> bytes:
    out = bytearray()
    for message in messages:
        body = message.SerializeToString()
        out += len(body).to_bytes(4, "big") + body
    return bytes(out)


def write_every_form(folder: Path, spans: list[ReadableSpan]) -> dict[str, Path]:
    """The same spans in each file form ingest reads, plain and gzipped; one file per form."""
    halves = [request(spans[: len(spans) // 2]), request(spans[len(spans) // 2:])]
    whole = request(spans)
    forms: dict[str, bytes] = {
        "json": json.dumps(otlp_json(whole), indent=2).encode(),
        "jsonl": b"".join(json.dumps(otlp_json(m)).encode() + b"\n" for m in halves),
        "pb": whole.SerializeToString(),
        "pb-stream": length_prefixed(halves),
    }
    paths: dict[str, Path] = {}
    for name, data in forms.items():
        plain = folder / f"traces.{name}"
        plain.write_bytes(data)
        paths[name] = plain
        zipped = folder / f"traces.{name}.gz"
        zipped.write_bytes(gzip.compress(data, mtime=0))
        paths[f"{name}.gz"] = zipped
    return paths
