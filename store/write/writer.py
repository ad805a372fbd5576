"""Stores flattened batches: one transaction per call, a span stored at most once.

Rows go in through Arrow (DuckDB scans an Arrow table without copying it row by row;
`executemany` is about a thousand times slower). Duplicates are dropped through span_keys
(store/file/schema/span_keys.sql): the batch's (trace_id, span_id) as integers go in first with
INSERT OR IGNORE ... RETURNING, and only the spans whose keys came back are stored (all of
them, without a join, in the usual case where every key was new and distinct).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from store.file.sql_files import load_queries
from store.rows.batch import (
    CONVENTIONS,
    LOG_COLUMNS,
    RESOURCE_COLUMNS,
    SCOPE_COLUMNS,
    SPAN_COLUMNS,
    FlatBatch,
)
from store.rows.typed_attributes import CONVENTION_COLUMNS
from store.rows.usage import USAGE_COLUMNS

_JSON_STRUCT_FIELDS = [("attributes", pa.string()), ("dropped_attributes_count", pa.uint32())]
_EVENT = pa.struct([("time_ns", pa.int64()), ("name", pa.string()), *_JSON_STRUCT_FIELDS])
_LINK = pa.struct([("trace_id", pa.string()), ("span_id", pa.string()),
                   ("trace_state", pa.string()), ("flags", pa.uint32()), *_JSON_STRUCT_FIELDS])
_ARROW_TYPES: dict[str, pa.DataType] = {
    "flags": pa.uint32(), "kind": pa.int8(), "start_ns": pa.int64(), "end_ns": pa.int64(),
    "status_code": pa.int8(), "dropped_attributes_count": pa.uint32(),
    "events": pa.list_(_EVENT), "dropped_events_count": pa.uint32(),
    "links": pa.list_(_LINK), "dropped_links_count": pa.uint32(),
    "budget_total_ms": pa.int64(), "budget_deadline_unix_ms": pa.int64(),
    "budget_reserve_ms": pa.int64(), "budget_remaining_ms": pa.int64(),
    "budget_cap_ms": pa.int64(), "budget_allocated_ms": pa.int64(), "budget_attempt": pa.int64(),
    "budget_hedge": pa.bool_(), "budget_cleanup_ms": pa.int64(),
    "http_response_status_code": pa.int64(), "grpc_status_code": pa.int32(),
    "exception_types": pa.list_(pa.string()),
}
# The sparse columns that are not text: usage, costs and budgets of docs/metrics.md §11
# (store/rows/usage.py), whose values the writer hands DuckDB typed.
_SPARSE_TYPES: dict[str, pa.DataType] = {
    **{column: pa.int64() for column in USAGE_COLUMNS if column != "usage_ignored"},
    "usage_ignored": pa.list_(pa.string()),
    "usage_input_includes_cache": pa.bool_(),
}
SPAN_SCHEMA = pa.schema([(c, _ARROW_TYPES.get(c, pa.string())) for c in SPAN_COLUMNS
                         if c != CONVENTIONS])
RESOURCE_SCHEMA = pa.schema([(c, pa.uint32() if c.startswith("dropped") else pa.string())
                             for c in RESOURCE_COLUMNS])
_LOG_TYPES: dict[str, pa.DataType] = {
    "record_key_hi": pa.uint64(), "record_key_lo": pa.uint64(), "time_ns": pa.int64(),
    "observed_time_ns": pa.int64(), "severity_number": pa.int8(),
    "dropped_attributes_count": pa.uint32(), "flags": pa.uint32(),
}
LOG_SCHEMA = pa.schema([(c, _LOG_TYPES.get(c, pa.string())) for c in LOG_COLUMNS])
SCOPE_SCHEMA = pa.schema([(c, pa.uint32() if c.startswith("dropped") else pa.string())
                          for c in SCOPE_COLUMNS])

WRITE_FOLDER = Path(__file__).with_name("sql")
WRITE_QUERIES = load_queries(WRITE_FOLDER, frozenset({
    "insert_span_keys", "insert_spans", "insert_new_spans", "mark_pending_derivations",
    "insert_log_records", "new_log_records", "mark_pending_log_exceptions"}))
INSERT_SPAN_KEYS = WRITE_QUERIES["insert_span_keys"].text
INSERT_SPANS = WRITE_QUERIES["insert_spans"].text
INSERT_NEW_SPANS = WRITE_QUERIES["insert_new_spans"].text
MARK_PENDING = WRITE_QUERIES["mark_pending_derivations"].text
INSERT_LOG_RECORDS = WRITE_QUERIES["insert_log_records"].text
NEW_LOG_RECORDS = WRITE_QUERIES["new_log_records"].text
MARK_PENDING_LOGS = WRITE_QUERIES["mark_pending_log_exceptions"].text
INSERT_RESOURCES = "INSERT OR IGNORE INTO resources SELECT * FROM incoming_resources"
INSERT_SCOPES = "INSERT OR IGNORE INTO scopes SELECT * FROM incoming_scopes"


@dataclass(frozen=True)
class WriteResult:
    inserted: int  # spans stored by this write
    duplicates: int  # spans that were already stored (or repeated within the batch)
    logs_inserted: int = 0  # log records stored by this write
    logs_duplicates: int = 0  # log records already stored (or repeated within the batch)
    # of logs_inserted: records with a span context whose span was not stored at that moment
    logs_span_missing: int = 0


def to_arrow(batch: FlatBatch) -> pa.Table:
    """The spans as one Arrow table; of the sparse columns (the conventions of docs/conventions.md,
    text; the usage and costs of §11), only those some span of the batch has: INSERT ... BY NAME
    leaves the others NULL."""
    spans = batch.spans
    table = pa.Table.from_pydict({c: spans[c] for c in SPAN_SCHEMA.names}, schema=SPAN_SCHEMA)
    for column, values in sorted(sparse_columns(spans[CONVENTIONS]).items()):
        table = table.append_column(column, pa.array(values, _SPARSE_TYPES.get(column,
                                                                              pa.string())))
    return table


def sparse_columns(rows: list[dict[str, Any] | None]) -> dict[str, list[Any]]:
    """The convention columns some row has, each a full column (None elsewhere). One pass over
    the rows that have any: reading every column of every row cost ~3 µs a span."""
    columns: dict[str, list[Any]] = {}
    count = len(rows)
    for index, row in enumerate(rows):
        if row is None:
            continue
        for column, value in row.items():
            if column in CONVENTION_COLUMNS:
                values = columns.get(column)
                if values is None:
                    values = columns[column] = [None] * count
                values[index] = value
    return columns


def _id_words(hex_ids: list[str], words: int) -> list[pa.Array]:
    """Fixed-width lowercase hex ids as `words` big-endian UBIGINT columns (vectorized: one
    bytes.fromhex of the joined ids, ~0.05 µs a span)."""
    if not hex_ids:
        return [pa.array([], pa.uint64()) for _ in range(words)]
    values = np.frombuffer(bytes.fromhex("".join(hex_ids)), dtype=">u8").astype(np.uint64)
    return [pa.array(np.ascontiguousarray(values[word::words])) for word in range(words)]


def with_keys(spans: pa.Table, batch: FlatBatch) -> pa.Table:
    """The spans table plus span_keys' columns and each row's arrival order."""
    trace_hi, trace_lo = _id_words(batch.spans["trace_id"], 2)
    [span_key] = _id_words(batch.spans["span_id"], 1)
    for name, column in (("trace_key_hi", trace_hi), ("trace_key_lo", trace_lo),
                         ("span_key", span_key),
                         ("arrival", pa.array(np.arange(spans.num_rows, dtype=np.int64)))):
        spans = spans.append_column(name, column)
    return spans


def logs_to_arrow(batch: FlatBatch) -> pa.Table:
    """The batch's log records, the first of each record key only, plus the integer keys of
    their span context (0 without one: no stored span has an all-zero id) to match span_keys."""
    logs = batch.logs
    first: dict[tuple[int, int], int] = {}
    for index, key in enumerate(zip(logs["record_key_hi"], logs["record_key_lo"], strict=True)):
        first.setdefault(key, index)
    rows = list(first.values())
    columns = {c: [logs[c][i] for i in rows] for c in LOG_COLUMNS} if len(rows) < len(
        logs["record_key_hi"]) else logs
    table = pa.Table.from_pydict(columns, schema=LOG_SCHEMA)
    traces = [t or "0" * 32 for t in columns["trace_id"]]
    spans = [s or "0" * 16 for s in columns["span_id"]]
    trace_hi, trace_lo = _id_words(traces, 2)
    [span_key] = _id_words(spans, 1)
    for name, column in (("trace_key_hi", trace_hi), ("trace_key_lo", trace_lo),
                         ("span_key", span_key)):
        table = table.append_column(name, column)
    return table


def _unknown(rows: dict[str, tuple[object, ...]], stored: set[str]
             ) -> dict[str, tuple[object, ...]]:
    return {key: row for key, row in rows.items() if key not in stored}


def rows_to_arrow(rows: dict[str, tuple[object, ...]], schema: pa.Schema) -> pa.Table:
    """Resource or scope rows (key -> row) as an Arrow table of `schema` (RESOURCE_SCHEMA,
    SCOPE_SCHEMA), as the writer stores them."""
    columns = list(zip(*rows.values(), strict=True)) if rows else [() for _ in schema.names]
    return pa.Table.from_arrays([pa.array(list(c), type=t) for c, t in
                                 zip(columns, schema.types, strict=True)], schema=schema)


# How many times this process deleted resource or scope rows. Process-wide rather than per
# connection or file because the deleter (store/retention/passes.py) runs on whatever connection
# it is given and knows no writer; forgetting too often costs one INSERT OR IGNORE, too seldom a
# span whose resource row is gone. One writer per file across processes (DuckDB's lock), so no other
# process can delete rows under a writer of this one.
_deletion_lock = threading.Lock()
_deletion_count = 0


def rows_deleted() -> None:
    """Say that resource or scope rows may have been deleted: every SpanWriter of this process
    inserts-or-ignores its next batch's resources and scopes again."""
    global _deletion_count
    with _deletion_lock:
        _deletion_count += 1


def _deletions() -> int:
    return _deletion_count


# An optional hook called inside the write's transaction, with the traces the batch touched in
# the temp table `touched_traces(trace_id, since)`: what it does commits or rolls back together
# with the spans. Derivation does not use it (see store/derive/pending.py: it runs after the
# acknowledged write); tests use it to derive synchronously or to inject a failure.
AfterWrite = Callable[[duckdb.DuckDBPyConnection], None]


class SpanWriter:
    """The only code that writes spans. Owns the connection it is given and remembers which
    resources and scopes it has committed (see `rows_deleted`)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, after_write: AfterWrite | None = None
                 ) -> None:
        self.con = con
        self.after_write = after_write
        # Ids of resource and scope rows this writer committed. An exporter sends the same few
        # resources and scopes in every request, and the INSERT OR IGNORE of a few known rows
        # cost ~5 ms a statement whatever their number (~5 µs a span at 2048-span transactions,
        # 6% of the write path): a batch whose rows are all known skips both statements. Only
        # what committed is remembered, and all of it is forgotten whenever something in the
        # process may have deleted such rows (`rows_deleted`: retention's orphan sweep).
        self._stored_resources: set[str] = set()
        self._stored_scopes: set[str] = set()
        self._deletions_seen = _deletions()

    def _forget_if_deleted(self) -> None:
        deletions = _deletions()
        if deletions != self._deletions_seen:
            self._stored_resources.clear()
            self._stored_scopes.clear()
            self._deletions_seen = deletions

    def write(self, batch: FlatBatch) -> WriteResult:
        if batch.span_count == 0 and batch.log_count == 0:
            return WriteResult(0, 0)
        spans = with_keys(to_arrow(batch), batch)
        logs = logs_to_arrow(batch) if batch.log_count else None
        self._forget_if_deleted()
        new_resources = _unknown(batch.resources, self._stored_resources)
        new_scopes = _unknown(batch.scopes, self._stored_scopes)
        con = self.con
        con.begin()
        try:
            con.register("incoming_spans", spans)
            if new_resources:
                con.register("incoming_resources",
                             rows_to_arrow(new_resources, RESOURCE_SCHEMA))
                con.execute(INSERT_RESOURCES)
            if new_scopes:
                con.register("incoming_scopes", rows_to_arrow(new_scopes, SCOPE_SCHEMA))
                con.execute(INSERT_SCOPES)
            new_keys = con.execute(INSERT_SPAN_KEYS).fetchnumpy()
            new = len(new_keys["span_key"])
            if new == spans.num_rows:
                row = con.execute(INSERT_SPANS).fetchone()
            elif new:
                con.register("new_span_keys", pa.table(new_keys))
                row = con.execute(INSERT_NEW_SPANS).fetchone()
            else:
                row = (0,)
            con.execute(MARK_PENDING)
            logs_inserted = logs_missing = 0
            if logs is not None:
                logs_inserted, logs_missing = self._write_logs(logs)
            if self.after_write is not None:
                logs_touched = (" UNION SELECT DISTINCT trace_id, now() FROM incoming_logs"
                                " WHERE exception_type IS NOT NULL AND trace_id IS NOT NULL"
                                if logs is not None else "")
                con.execute("CREATE OR REPLACE TEMP TABLE touched_traces AS "
                            "SELECT DISTINCT trace_id, now() AS since FROM incoming_spans"
                            + logs_touched)
                self.after_write(con)
            con.commit()
            self._stored_resources.update(new_resources)
            self._stored_scopes.update(new_scopes)
        except BaseException:
            # A failed COMMIT (disk full) has already ended the transaction, and rollback then
            # raises "no transaction is active", which would hide the real cause.
            with contextlib.suppress(duckdb.Error):
                con.rollback()
            raise
        finally:
            for name in ("incoming_spans", "incoming_resources", "incoming_scopes",
                         "new_span_keys", "incoming_logs", "new_log_keys"):
                con.unregister(name)
        inserted = int(row[0]) if row else 0
        return WriteResult(inserted, batch.span_count - inserted, logs_inserted,
                           batch.log_count - logs_inserted, logs_missing)

    def _write_logs(self, logs: pa.Table) -> tuple[int, int]:
        """Store the new log records (after the batch's spans, so that a record and its span
        in one batch match); (records stored, of those whose span is not stored)."""
        con = self.con
        con.register("incoming_logs", logs)
        new_keys = con.execute(INSERT_LOG_RECORDS).fetchnumpy()
        new = len(new_keys["record_key_hi"])
        if not new:
            return 0, 0
        con.register("new_log_keys", pa.table(new_keys))
        row = con.execute(NEW_LOG_RECORDS).fetchone()
        con.execute(MARK_PENDING_LOGS)
        return new, int(row[0]) if row else 0
