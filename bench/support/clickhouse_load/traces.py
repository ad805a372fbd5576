"""Trace files → otel_traces rows, as the Collector's ClickHouse exporter writes them.

Used by the tests and bench/bench_clickhouse.py to put the same traces in ClickHouse that
`budgetscope ingest` puts in DuckDB. Files are decoded by ingest's own readers and flatteners
(ingest.files.sources, FlatBatch), so exactly the spans ingest accepts are written, then each span
becomes one row the way the exporter's traces writer fills it (exporter/clickhouseexporter in
opentelemetry-collector-contrib, read, not copied):
- Timestamp = span start; Duration = end - start in ns; ids as lowercase hex, '' when absent;
- SpanKind and StatusCode as pdata names (`Server`, `Client`, `Internal`, …; `Unset`, `Ok`,
  `Error`); ServiceName = the resource's service.name when it is a string, else '';
- every attribute value as pdata's Value.AsString: strings as they are, ints in decimal, doubles
  shortest as encoding/json writes them (`0.0123`, `1e-7`, `1e+21`), bools `true`/`false`,
  bytes base64, arrays and maps as JSON;
- ScopeName and ScopeVersion from the instrumentation scope; events and links as the Nested
  columns Events.* and Links.*, one array element per event or link.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.decode.flatten import DEFAULT_MAX_FUTURE_NS, flatten_request
from ingest.files.sources import expand_paths, read_pieces
from store import FlatBatch, clickhouse

TABLE = "otel_traces"
SPAN_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
STATUS_CODES = ("Unset", "Ok", "Error")
ROWS_PER_INSERT = 50_000

_TIME = pa.timestamp("ns", tz="UTC")
_MAP = pa.map_(pa.string(), pa.string())
SCHEMA = pa.schema([
    ("Timestamp", _TIME), ("TraceId", pa.string()), ("SpanId", pa.string()),
    ("ParentSpanId", pa.string()), ("TraceState", pa.string()), ("SpanName", pa.string()),
    ("SpanKind", pa.string()), ("ServiceName", pa.string()), ("ResourceAttributes", _MAP),
    ("ScopeName", pa.string()), ("ScopeVersion", pa.string()), ("SpanAttributes", _MAP),
    ("Duration", pa.uint64()), ("StatusCode", pa.string()), ("StatusMessage", pa.string()),
    ("Events.Timestamp", pa.list_(_TIME)), ("Events.Name", pa.list_(pa.string())),
    ("Events.Attributes", pa.list_(_MAP)),
    ("Links.TraceId", pa.list_(pa.string())), ("Links.SpanId", pa.list_(pa.string())),
    ("Links.TraceState", pa.list_(pa.string())), ("Links.Attributes", pa.list_(_MAP)),
])
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def as_string(value: Any) -> str:
    """A stored attribute value (ingest's JSON form) as the exporter's AsString writes it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _double_as_string(value)
    if isinstance(value, dict) and set(value) == {"bytesValue"}:
        return str(value["bytesValue"])  # bytes: base64, as ingest keeps them
    if value is None:
        return ""
    return _compact(value)


def _double_as_string(value: float) -> str:
    """pdata's float64AsString: ES6's number to string, as encoding/json writes it (shortest
    digits; an exponent below 10^-6 and from 10^21 on, `1e-7`, `1e+21`); NaN and infinities
    as the error text it writes for them."""
    if math.isnan(value) or math.isinf(value):
        shown = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
        return f"json: unsupported value: {shown}"
    if value != 0 and (abs(value) < 1e-6 or abs(value) >= 1e21):
        text = np.format_float_scientific(value, trim="-", exp_digits=2)
        mantissa, exponent = text.split("e")
        sign, digits = exponent[0], exponent[1:].lstrip("0") or "0"
        return f"{mantissa}e{sign}{digits if sign == '-' else digits.zfill(2)}"
    return np.format_float_positional(value, trim="-")


def _attribute_map(attributes_json: str) -> list[tuple[str, str]]:
    return [(key, as_string(value)) for key, value in json.loads(attributes_json).items()]


def _rows(batch: FlatBatch) -> dict[str, list[Any]]:
    """The exporter's columns for every span of a flattened batch."""
    spans = batch.spans
    resources = {rid: (values[1], _attribute_map(values[2]))
                 for rid, values in batch.resources.items()}
    scopes = {sid: (values[1], values[2]) for sid, values in batch.scopes.items()}
    out: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for i in range(batch.span_count):
        service, resource_attributes = resources[spans["resource_id"][i]]
        scope_name, scope_version = scopes[spans["scope_id"][i]]
        start, end = spans["start_ns"][i], spans["end_ns"][i]
        events, links = spans["events"][i], spans["links"][i]
        kind, status = spans["kind"][i], spans["status_code"][i]
        out["Timestamp"].append(start)
        out["TraceId"].append(spans["trace_id"][i])
        out["SpanId"].append(spans["span_id"][i])
        out["ParentSpanId"].append(spans["parent_span_id"][i] or "")
        out["TraceState"].append(spans["trace_state"][i])
        out["SpanName"].append(spans["name"][i])
        out["SpanKind"].append(SPAN_KINDS[kind] if 0 <= kind < len(SPAN_KINDS) else "")
        out["ServiceName"].append(service if isinstance(service, str) else "")
        out["ResourceAttributes"].append(resource_attributes)
        out["ScopeName"].append(scope_name)
        out["ScopeVersion"].append(scope_version)
        out["SpanAttributes"].append(_attribute_map(spans["attributes"][i]))
        out["Duration"].append(max(0, end - start))
        out["StatusCode"].append(STATUS_CODES[status] if 0 <= status < 3 else "")
        out["StatusMessage"].append(spans["status_message"][i])
        out["Events.Timestamp"].append([event["time_ns"] for event in events])
        out["Events.Name"].append([event["name"] for event in events])
        out["Events.Attributes"].append([_attribute_map(event["attributes"])
                                         for event in events])
        out["Links.TraceId"].append([link["trace_id"] for link in links])
        out["Links.SpanId"].append([link["span_id"] for link in links])
        out["Links.TraceState"].append([link["trace_state"] for link in links])
        out["Links.Attributes"].append([_attribute_map(link["attributes"]) for link in links])
    return out


def arrow_batches(paths: Iterable[str | Path],
                  rows_per_batch: int = ROWS_PER_INSERT) -> Iterator[pa.Table]:
    """otel_traces rows of every span ingest accepts in these files, a batch at a time."""
    batch = FlatBatch()
    for path in expand_paths(list(paths)):
        for piece in read_pieces(path):
            piece.flatten(max_future_ns=DEFAULT_MAX_FUTURE_NS, into=batch)
            if batch.span_count >= rows_per_batch:
                yield pa.table(_rows(batch), schema=SCHEMA)
                batch = FlatBatch()
    if batch.span_count:
        yield pa.table(_rows(batch), schema=SCHEMA)


def table_of_request(request: ExportTraceServiceRequest) -> pa.Table:
    """otel_traces rows of one OTLP request (the spans ingest would accept from it)."""
    return pa.table(_rows(flatten_request(request)), schema=SCHEMA)


def create_otel_traces(con: clickhouse.ClickHouseConnection) -> None:
    """The exporter's table (store/clickhouse/sql/otel_traces_table.sql), if missing."""
    con.run_script("otel_traces_table")


def load_files(con: clickhouse.ClickHouseConnection, paths: Iterable[str | Path]) -> int:
    """Write the spans of these trace files into otel_traces; returns how many."""
    create_otel_traces(con)
    written = 0
    for table in arrow_batches(paths):
        con.insert_arrow(TABLE, table)
        written += table.num_rows
    return written


def load_requests(con: clickhouse.ClickHouseConnection,
                  requests: Iterable[ExportTraceServiceRequest]) -> int:
    """Write the spans of these OTLP requests into otel_traces; returns how many."""
    create_otel_traces(con)
    written = 0
    for request in requests:
        table = table_of_request(request)
        con.insert_arrow(TABLE, table)
        written += table.num_rows
    return written
