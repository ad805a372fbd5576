"""The row contract between decoding and the store: what a batch of spans, resources, scopes and
OTLP log records looks like on its way to the writer (store/write/writer.py turns it into Arrow
tables of the same columns as store/file/schema/).

Every decoder (ingest/decode/: protobuf, OTLP JSON, logs) fills a FlatBatch; the writer, the group
commit and the ClickHouse loaders of the tests read one. A new typed column is added to
store/rows/typed_attributes.py (and its schema file); the columns here follow from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from store.rows.rejections import Rejection
from store.rows.typed_attributes import CONVENTION_COLUMNS, TYPED_COLUMNS

DENSE_TYPED_COLUMNS = tuple(c for c in TYPED_COLUMNS if c not in CONVENTION_COLUMNS)
CONVENTIONS = "conventions"
SPAN_COLUMNS: tuple[str, ...] = (
    "trace_id", "span_id", "parent_span_id", "trace_state", "flags", "name", "kind",
    "start_ns", "end_ns", "status_code", "status_message", "resource_id", "scope_id",
    "service_name", "attributes", "dropped_attributes_count", "events", "dropped_events_count",
    "links", "dropped_links_count", *DENSE_TYPED_COLUMNS, "exception_types",
    # the typed convention columns (docs/conventions.md) a span has, as one dict (or None) per span
    CONVENTIONS,
)
RESOURCE_COLUMNS = ("resource_id", "service_name", "attributes", "dropped_attributes_count",
                    "schema_url")
SCOPE_COLUMNS = ("scope_id", "name", "version", "attributes", "dropped_attributes_count",
                 "schema_url")
# Rows of log_records (ingest/decode/log_flatten.py fills them); the record key is its identity.
LOG_COLUMNS: tuple[str, ...] = (
    "record_key_hi", "record_key_lo", "trace_id", "span_id", "time_ns", "observed_time_ns",
    "severity_number", "severity_text", "body", "attributes", "dropped_attributes_count",
    "flags", "event_name", "resource_id", "scope_id", "service_name", "exception_type",
)


@dataclass
class FlatBatch:
    """Rows ready for the writer, plus what was refused on the way. Spans and OTLP log
    records travel in the same batch (and so commit in the same transaction)."""

    spans: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in SPAN_COLUMNS})
    resources: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    scopes: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    rejections: list[Rejection] = field(default_factory=list)
    span_count: int = 0
    logs: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in LOG_COLUMNS})
    log_count: int = 0
    logs_without_span: int = 0  # of log_count: records that carry no span context

    @property
    def items(self) -> int:
        """Spans and log records: what the writer's queue limits count."""
        return self.span_count + self.log_count

    def extend(self, other: FlatBatch) -> None:
        for column, values in other.spans.items():
            self.spans[column].extend(values)
        if other.log_count:
            for column, values in other.logs.items():
                self.logs[column].extend(values)
        self.resources.update(other.resources)
        self.scopes.update(other.scopes)
        self.rejections.extend(other.rejections)
        self.span_count += other.span_count
        self.log_count += other.log_count
        self.logs_without_span += other.logs_without_span

    def trace_ids(self) -> set[str]:
        return set(self.spans["trace_id"])
