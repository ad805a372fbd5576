"""OTLP log records → otel_logs rows, as the Collector's ClickHouse exporter writes them.

For the tests (and benchmarks) that put in ClickHouse the log records `budgetscope ingest` puts
in DuckDB: files are read and flattened by ingest's own readers, so exactly the records ingest
accepts are written, each as one row the way the exporter's logs writer fills it
(exporter/clickhouseexporter/exporter_logs.go in opentelemetry-collector-contrib, read, not
copied): Timestamp = the record's time, else its observed time; ids as lowercase hex, '' when
absent; Body and every attribute as pdata's AsString; ServiceName from the resource.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.support.clickhouse_load.traces import as_string
from ingest.decode.flatten import DEFAULT_MAX_FUTURE_NS
from ingest.files.sources import expand_paths, read_pieces
from store import FlatBatch, clickhouse

TABLE = "otel_logs"
_TIME = pa.timestamp("ns", tz="UTC")
_MAP = pa.map_(pa.string(), pa.string())
SCHEMA = pa.schema([
    ("Timestamp", _TIME), ("TraceId", pa.string()), ("SpanId", pa.string()),
    ("TraceFlags", pa.uint8()), ("SeverityText", pa.string()), ("SeverityNumber", pa.uint8()),
    ("ServiceName", pa.string()), ("Body", pa.string()), ("ResourceSchemaUrl", pa.string()),
    ("ResourceAttributes", _MAP), ("ScopeSchemaUrl", pa.string()), ("ScopeName", pa.string()),
    ("ScopeVersion", pa.string()), ("ScopeAttributes", _MAP), ("LogAttributes", _MAP),
])


def _map(attributes_json: str) -> list[tuple[str, str]]:
    return [(key, as_string(value)) for key, value in json.loads(attributes_json).items()]


def log_rows(batch: FlatBatch) -> dict[str, list[Any]]:
    """The exporter's columns for every log record of a flattened batch."""
    logs = batch.logs
    out: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for i in range(batch.log_count):
        resource = batch.resources[logs["resource_id"][i]]
        scope = batch.scopes[logs["scope_id"][i]]
        body = logs["body"][i]
        out["Timestamp"].append(logs["time_ns"][i])
        out["TraceId"].append(logs["trace_id"][i] or "")
        out["SpanId"].append(logs["span_id"][i] or "")
        out["TraceFlags"].append(logs["flags"][i] & 0xFF)  # the exporter's uint8 of the flags
        out["SeverityText"].append(logs["severity_text"][i])
        out["SeverityNumber"].append(logs["severity_number"][i])
        out["ServiceName"].append(resource[1] if isinstance(resource[1], str) else "")
        out["Body"].append("" if body is None else as_string(json.loads(body)))
        out["ResourceSchemaUrl"].append(resource[4])
        out["ResourceAttributes"].append(_map(resource[2]))
        out["ScopeSchemaUrl"].append(scope[5])
        out["ScopeName"].append(scope[1])
        out["ScopeVersion"].append(scope[2])
        out["ScopeAttributes"].append(_map(scope[3]))
        out["LogAttributes"].append(_map(logs["attributes"][i]))
    return out


def create_otel_logs(con: clickhouse.ClickHouseConnection) -> None:
    """The exporter's table (store/clickhouse/sql/otel_logs_table.sql), if missing."""
    con.run_script("otel_logs_table")


def load_log_files(con: clickhouse.ClickHouseConnection, paths: Iterable[str | Path]) -> int:
    """Write the log records of these files into otel_logs; returns how many."""
    create_otel_logs(con)
    batch = FlatBatch()
    for path in expand_paths(list(paths)):
        for piece in read_pieces(path):
            piece.flatten(max_future_ns=DEFAULT_MAX_FUTURE_NS, into=batch)
    if batch.log_count:
        con.insert_arrow(TABLE, pa.table(log_rows(batch), schema=SCHEMA))
    return batch.log_count
