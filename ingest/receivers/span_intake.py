"""What both receivers do with a request body: decode, flatten, commit, summarise.

The work that needs the CPU (protobuf/JSON decoding and flattening to rows) runs in the
receiver's request thread; only the commit is serialized, in the group-commit writer.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

from ingest.decode.otlp_json import NotOtlpJson, flatten_json_request
from ingest.decode.proto_decode import UndecodableMessage
from ingest.decode.proto_flatten import flatten_protobuf
from ingest.receivers.counters import ReceiverCounters
from store import Closed, FlatBatch, GroupCommitter, Overloaded, Rejection, WriteFailed

# partial_success.error_message lists this many reasons, with one example each.
_REASONS_SHOWN = 3


# Seconds a client is asked to wait when the server is shutting down or a write failed (disk
# full, I/O error): neither has an estimate of its own, unlike Overloaded.retry_after.
RETRY_AFTER_UNAVAILABLE = 5


def retry_after_seconds(error: Overloaded | Closed | WriteFailed) -> int:
    """How long a refused client should wait: Retry-After over HTTP, RetryInfo over gRPC."""
    return error.retry_after if isinstance(error, Overloaded) else RETRY_AFTER_UNAVAILABLE


# Rejections that refuse no span but leave a value out of it or replace it: counted per value
# (budgetscope_values_refused_total) rather than as refused spans.
VALUE_REASONS = frozenset({"budget_out_of_range", "budget_not_a_number",
                           "resource_text_replaced"})


class Undecodable(ValueError):
    """Nothing in the body is an ExportTraceServiceRequest: 400 / INVALID_ARGUMENT."""


@dataclass(frozen=True)
class Accepted:
    """Committed. `rejected_spans`/`error_message` fill partial_success when non-empty."""

    spans: int
    rejected_spans: int = 0
    error_message: str = ""
    rejected_by_reason: dict[str, int] = field(default_factory=dict)  # for /metrics

    def response(self) -> ExportTraceServiceResponse:
        response = ExportTraceServiceResponse()
        if self.rejected_spans or self.error_message:
            response.partial_success.rejected_spans = self.rejected_spans
            response.partial_success.error_message = self.error_message
        return response

    def record(self, counters: ReceiverCounters, transport: str, peer: str) -> None:
        counters.answered(transport, peer, self.spans, self.rejected_by_reason)


def summarise(rejections: list[Rejection], *, logs: bool = False) -> str:
    """'2 span(s) refused: bad_id ×2 (resource 0, scope 0, span 3: span 'x' refused: …)';
    with `logs`, the same for log records ('2 log record(s) refused: …')."""
    if not rejections:
        return ""
    counts = Counter(r.reason for r in rejections)
    examples: dict[str, Rejection] = {}
    for rejection in rejections:
        examples.setdefault(rejection.reason, rejection)
    refused = sum(r.log_records if logs else r.spans for r in rejections)
    parts = [f"{reason} ×{count} ({examples[reason]})"
             for reason, count in counts.most_common(_REASONS_SHOWN)]
    if len(counts) > _REASONS_SHOWN:
        parts.append(f"and {len(counts) - _REASONS_SHOWN} more reasons")
    noun = "log record(s)" if logs else "span(s)"
    head = f"{refused} {noun} refused" if refused else "warnings"
    return f"{head}: " + "; ".join(parts)


class SpanIntake:
    """Turns bodies into committed spans. Raises Undecodable, Overloaded, WriteFailed, Closed."""

    def __init__(self, committer: GroupCommitter, commit_timeout: float,
                 max_decoding: int = 4) -> None:
        self.committer = committer
        self.commit_timeout = commit_timeout
        # Decoding holds the GIL, so running more requests' decodes at once gains no speed;
        # it only multiplies the memory of inflated bodies and half-built rows (a 64 MiB body
        # is several hundred MB of Python objects). Requests beyond this wait their turn.
        self._decoding = threading.BoundedSemaphore(max_decoding)
        self.counters = ReceiverCounters()  # what both receivers answered, for /metrics

    @contextmanager
    def _decoding_slot(self) -> Iterator[None]:
        """One of the decode slots; Overloaded after the commit timeout, so that a request
        never waits unanswered for ever."""
        if not self._decoding.acquire(timeout=self.commit_timeout):
            raise Overloaded("too many requests being decoded",
                             self.committer.retry_after_seconds)
        try:
            yield
        finally:
            self._decoding.release()

    def export_protobuf(self, body: bytes, where: str,
                        inflate: Callable[[bytes], bytes] | None = None) -> Accepted:
        """Inflate (e.g. gunzip), decode, flatten, commit. `inflate` runs in the decode slot."""
        return self._export(body, where, inflate, self.decode_protobuf)

    def export_json(self, body: bytes, where: str,
                    inflate: Callable[[bytes], bytes] | None = None) -> Accepted:
        return self._export(body, where, inflate, self.decode_json)

    @staticmethod
    def decode_protobuf(body: bytes, where: str) -> FlatBatch:
        try:
            return flatten_protobuf(body, where)
        except UndecodableMessage as error:
            raise Undecodable(str(error)) from None

    @staticmethod
    def decode_json(body: bytes, where: str) -> FlatBatch:
        try:
            # surrogateescape keeps a span with invalid UTF-8 text parseable, so that
            # the flattener refuses that span alone instead of the whole body.
            document = json.loads(body.decode("utf-8", "surrogateescape")) if body else {}
            return flatten_json_request(document, where=where)
        except (ValueError, RecursionError) as error:  # JSONDecodeError, NotOtlpJson
            what = "not OTLP JSON" if isinstance(error, NotOtlpJson) else "invalid JSON"
            raise Undecodable(f"{what}: {error}"[:500]) from None

    def _export(self, body: bytes, where: str, inflate: Callable[[bytes], bytes] | None,
                decode: Callable[[bytes, str], FlatBatch]) -> Accepted:
        batch = self.commit(body, where, inflate, decode)
        by_reason: Counter[str] = Counter()
        values_refused: Counter[str] = Counter()
        for rejection in batch.rejections:
            by_reason[rejection.reason] += rejection.spans
            if rejection.reason in VALUE_REASONS:
                values_refused[rejection.reason] += 1
        if values_refused:
            self.counters.refused_values(values_refused)
        return Accepted(batch.span_count, sum(by_reason.values()),
                        summarise(batch.rejections), dict(by_reason))

    def commit(self, body: bytes, where: str, inflate: Callable[[bytes], bytes] | None,
               decode: Callable[[bytes, str], FlatBatch]) -> FlatBatch:
        """Inflate and decode `body` in a decode slot, then wait until its rows are committed:
        the part both signals share (traces here, logs in log_intake.py). Returns the batch
        (its rows and rejections). Raises Undecodable, Overloaded, WriteFailed, Closed."""
        with self._decoding_slot():
            self.committer.decoding_started()  # lets the writer wait for this one (linger)
            try:
                if inflate is not None:
                    body = inflate(body)
                batch = decode(body, where)
                del body  # only the rows wait for the commit, not the body or its objects
                rejections = batch.rejections
                future = self.committer.submit(batch)
            finally:
                self.committer.decoding_finished()
        # The slot is free while we wait: many requests can wait for (and share) one commit.
        try:
            future.result(timeout=self.commit_timeout)
        except FutureTimeout:
            # Not acknowledged: the exporter retries, and a later commit of this batch is
            # harmless because a resent span is stored once.
            raise Overloaded(f"spans not committed within {self.commit_timeout:g} s",
                             self.committer.retry_after_seconds) from None
        # Only what the answer needs: the rows may be released.
        done = FlatBatch(rejections=rejections, span_count=batch.span_count,
                         log_count=batch.log_count, logs_without_span=batch.logs_without_span)
        return done
