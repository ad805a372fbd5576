"""`budgetscope ingest`: trace files → DuckDB, streaming, with a summary a person can act on."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from ingest.decode.flatten import DEFAULT_MAX_FUTURE_NS
from ingest.files.progress import Progress
from ingest.files.sources import OpenedFile, expand_paths, read_pieces
from store import (
    BackgroundWriter,
    FlatBatch,
    Rejection,
    RejectionLog,
    SpanWriter,
    measure_rootless,
    pending_derivations,
)

# Spans per transaction. Measured on a 1M-span protobuf file (2 cores): 5k-span transactions
# spent 84 s inserting, 20k-span ones 53-56 s; the two 20k batches in flight (one committing,
# one being decoded) cost ~60 MB more than 5k ones, paid back by a lower DuckDB memory limit.
CHUNK_SPANS = 20_000


@dataclass
class LoadSummary:
    files: int = 0
    spans_loaded: int = 0
    spans_present: int = 0  # already stored: the same (trace id, span id) came before
    # OTLP log records (resourceLogs): stored, already present (same record identity), and of
    # those read, records with no span context; of those stored, records whose span is not
    # stored (yet). Both kinds are kept: counted, never refused.
    logs_loaded: int = 0
    logs_present: int = 0
    logs_without_span: int = 0
    logs_span_missing: int = 0
    rejections: RejectionLog = field(default_factory=RejectionLog)
    traces_without_root: list[str] = field(default_factory=list)
    traces_without_root_count: int = 0
    # docs/conventions.md: traces without their root that this load measured from their earliest
    # span (None: the load left them waiting, as a grace period asked or derivation was off)
    traces_measured_without_root: int | None = None
    seconds: float = 0.0
    derive_seconds: float = 0.0  # of `seconds`, spent deriving runs and steps
    traces_failed_derivation: int = 0  # recorded in derivation_failures by this load

    @property
    def spans_rejected(self) -> int:
        return self.rejections.rejected_spans

    @property
    def logs_rejected(self) -> int:
        return self.rejections.rejected_log_records

    @property
    def logs_seen(self) -> bool:
        return bool(self.logs_loaded or self.logs_present or self.logs_rejected)

    def lines(self) -> list[str]:
        rate = self.spans_loaded / self.seconds if self.seconds > 0 else 0.0
        out = [f"{self.files} file(s): {self.spans_loaded:,} spans loaded, "
               f"{self.spans_present:,} already present, {self.spans_rejected:,} rejected "
               f"({self.seconds:.1f} s, {rate:,.0f} spans/s)"]
        if self.logs_seen:
            out.append(f"  log records: {self.logs_loaded:,} loaded, {self.logs_present:,} "
                       f"already present, {self.logs_rejected:,} rejected; kept "
                       f"{self.logs_without_span:,} without a span context and "
                       f"{self.logs_span_missing:,} whose span is not stored (yet)")
        for reason, count in sorted(self.rejections.counts.items()):
            spans = self.rejections.spans[reason]
            records = self.rejections.log_records[reason]
            counted = ", ".join(part for part in (
                f"{spans:,} spans" if spans else "",
                f"{records:,} log records" if records else "") if part)
            out.append(f"  rejected [{reason}] ×{count}" + (f" ({counted})" if counted else ""))
            for example in self.rejections.examples[reason]:
                out.append(f"    {example}")
            if count > len(self.rejections.examples[reason]):
                out.append(f"    … and {count - len(self.rejections.examples[reason])} more")
        if self.traces_without_root_count:
            shown = ", ".join(self.traces_without_root)
            more = self.traces_without_root_count - len(self.traces_without_root)
            what = ("measured from their earliest span (root_missing); a root that arrives "
                    "later replaces that run" if self.traces_measured_without_root
                    else "waiting for it (measured from their earliest span once none of their "
                    "spans has arrived for the grace period, --root-grace)")
            out.append(f"  warning: {self.traces_without_root_count} trace(s) have no root span, "
                       f"{what}: {shown}" + (f", … and {more} more" if more > 0 else ""))
        if self.traces_failed_derivation:
            out.append(f"  warning: {self.traces_failed_derivation:,} trace(s) could not be "
                       "derived; their spans are stored, their runs and steps stay as last derived "
                       "(the database status counts them; new spans of a trace retry it)")
        return out


def _traces_without_root(
    con: duckdb.DuckDBPyConnection, trace_ids: set[str], keep: int
) -> tuple[int, list[str]]:
    if not trace_ids:
        return 0, []
    touched = pa.table({"trace_id": pa.array(sorted(trace_ids), type=pa.string())})
    con.register("loaded_traces", touched)
    try:
        rows = con.execute(
            "SELECT t.trace_id FROM loaded_traces t WHERE NOT EXISTS ("
            " SELECT 1 FROM spans s WHERE s.trace_id = t.trace_id AND s.parent_span_id IS NULL)"
            " ORDER BY t.trace_id").fetchall()
    finally:
        con.unregister("loaded_traces")
    return len(rows), [row[0] for row in rows[:keep]]


def load_files(
    con: duckdb.DuckDBPyConnection,
    paths: Iterable[str | os.PathLike[str]],
    *,
    progress: bool | None = None,
    chunk_spans: int = CHUNK_SPANS,
    max_future_ns: int = DEFAULT_MAX_FUTURE_NS,
    writer: SpanWriter | None = None,
    derive: bool = False,
    root_grace_seconds: float | None = None,
) -> LoadSummary:
    """Load every file; rejects what is bad, keeps what is good, never stores a span twice.
    With `derive`, the derived tables are brought up to date as the load goes and at its end
    (store/derive/scheduling.py, trigger 4); with `root_grace_seconds` too, traces whose root has
    not arrived, and whose last span is older than that once the files are read, are measured
    from their earliest span (docs/conventions.md; 0: every one of them)."""
    summary = LoadSummary()
    writer = writer or SpanWriter(con)
    derivations = pending_derivations() if derive else None
    files = list(expand_paths(list(paths)))
    total_bytes = sum(path.stat().st_size for path in files if path.is_file())
    bar = Progress(total_bytes, force=progress)
    started = time.monotonic()
    background = BackgroundWriter(writer, derivations=derivations)
    background.start()
    pending = FlatBatch()
    done_bytes = 0
    seen_spans = 0

    def flush() -> None:
        nonlocal pending
        background.submit(pending)
        pending = FlatBatch()

    for path in files:
        summary.files += 1
        if not path.exists():
            summary.rejections.add(Rejection("unreadable", "no such file", str(path), 0))
            continue
        opened: list[OpenedFile] = []
        for piece in read_pieces(path, opened):
            summary.rejections.extend(piece.rejections)
            before_items, before_rejections = pending.items, len(pending.rejections)
            before_without_span = pending.logs_without_span
            piece.flatten(max_future_ns=max_future_ns, into=pending)
            summary.rejections.extend(pending.rejections[before_rejections:])
            summary.logs_without_span += pending.logs_without_span - before_without_span
            seen_spans += pending.items - before_items
            if pending.items >= chunk_spans:
                flush()
            if opened:
                bar.update(done_bytes + opened[0].consumed, seen_spans)
        if opened:
            done_bytes += opened[0].size
    flush()
    try:
        background.close()
    finally:
        bar.close()
        summary.spans_loaded, summary.spans_present = background.inserted, background.duplicates
        summary.logs_loaded, summary.logs_present = (background.logs_inserted,
                                                     background.logs_duplicates)
        summary.logs_span_missing = background.logs_span_missing
    if derivations is not None and root_grace_seconds is not None:
        summary.traces_measured_without_root = measure_rootless(con, root_grace_seconds,
                                                                derivations)
    summary.traces_without_root_count, summary.traces_without_root = _traces_without_root(
        con, background.touched, keep=3)
    summary.seconds = time.monotonic() - started
    if derivations is not None:
        summary.derive_seconds = derivations.seconds
        summary.traces_failed_derivation = derivations.traces_failed
    return summary
