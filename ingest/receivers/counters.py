"""What the receivers did, counted for /metrics and logged (a line per kind of rejection at most
every ten seconds, log_pace.py: a client decides how many there are).

Counted per transport (http, grpc):
- spans received, accepted and rejected (by reason) in requests that were decoded and answered
  with success: received = accepted + rejected; a rejected span is one that partial_success
  reported (an id of the wrong length, invalid UTF-8, …), the rest of its request was stored;
- values refused in spans that were stored (by reason: budget_out_of_range, …): the span was
  kept without that value (store/rows/typed_attributes.py), counted for both transports together;
- requests refused whole (by reason: unauthenticated, too_large, undecodable, unavailable, …):
  their spans were never decoded, or never acknowledged (the exporter retries them), so they
  are counted as requests, not spans.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Mapping

from ingest.receivers.log_pace import LogPace

_LOG = logging.getLogger("budgetscope.receivers")

# Why a whole HTTP request was refused, by the status it was answered with.
HTTP_REASONS: Mapping[int, str] = {
    400: "undecodable", 401: "unauthenticated", 404: "not_found", 405: "method_not_allowed",
    411: "length_required", 413: "too_large", 415: "unsupported_media_type",
    429: "throttled", 503: "unavailable",
}


class ReceiverCounters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans_accepted: Counter[str] = Counter()  # transport → spans
        self.spans_rejected: Counter[tuple[str, str]] = Counter()  # (transport, reason) → spans
        self.requests_accepted: Counter[str] = Counter()
        self.requests_refused: Counter[tuple[str, str]] = Counter()
        # OTLP log records, as spans above: accepted (stored or already present), rejected by
        # reason, and of the accepted those without a span context (kept, counted).
        self.logs_accepted: Counter[str] = Counter()
        self.logs_rejected: Counter[tuple[str, str]] = Counter()
        self.logs_without_span: Counter[str] = Counter()
        self.values_refused: Counter[str] = Counter()  # reason → values
        # The log lines of rejections, one per kind and period; the counters above count all.
        self.log_pace = LogPace()

    def refused_values(self, by_reason: Mapping[str, int]) -> None:
        """Values left out of spans that were stored (rejections that refused no span)."""
        with self._lock:
            self.values_refused.update(by_reason)

    def answered(self, transport: str, peer: str, accepted_spans: int,
                 rejected: Mapping[str, int]) -> None:
        """A request answered with success: its stored spans and its refused ones by reason."""
        with self._lock:
            self.requests_accepted[transport] += 1
            self.spans_accepted[transport] += accepted_spans
            for reason, spans in rejected.items():
                self.spans_rejected[transport, reason] += spans
        for reason, spans in rejected.items():
            stands_for = self.log_pace.due(("spans_rejected", transport, reason), spans) \
                if spans else 0
            if stands_for:
                _LOG.warning("%s: %d span(s) from %s refused: %s%s", transport, stands_for, peer,
                             reason, self._since(stands_for, spans), extra={
                                 "event": "spans_rejected", "transport": transport,
                                 "peer": peer, "reason": reason, "spans": stands_for})

    def answered_logs(self, transport: str, peer: str, accepted: int, without_span: int,
                      rejected: Mapping[str, int]) -> None:
        """A logs request answered with success."""
        with self._lock:
            self.requests_accepted[transport] += 1
            self.logs_accepted[transport] += accepted
            self.logs_without_span[transport] += without_span
            for reason, records in rejected.items():
                self.logs_rejected[transport, reason] += records
        for reason, records in rejected.items():
            stands_for = self.log_pace.due(("log_records_rejected", transport, reason),
                                           records) if records else 0
            if stands_for:
                _LOG.warning("%s: %d log record(s) from %s refused: %s%s", transport,
                             stands_for, peer, reason, self._since(stands_for, records), extra={
                                 "event": "log_records_rejected", "transport": transport,
                                 "peer": peer, "reason": reason, "log_records": stands_for})

    def refused(self, transport: str, peer: str, reason: str, message: str) -> None:
        """A request refused whole."""
        with self._lock:
            self.requests_refused[transport, reason] += 1
        stands_for = self.log_pace.due(("request_rejected", transport, reason))
        if stands_for:
            _LOG.warning("%s: request from %s refused (%s): %s%s", transport, peer, reason,
                         message, self._since(stands_for, 1), extra={
                             "event": "request_rejected", "transport": transport, "peer": peer,
                             "reason": reason, "requests": stands_for, "detail": message[:300]})

    def _since(self, stands_for: int, own: int) -> str:
        """What a paced line adds when it stands for more than its own event."""
        if stands_for == own:
            return ""
        return (f" (with those of the same kind held back in the last "
                f"{self.log_pace.period:g} s: {stands_for})")

    def snapshot(self) -> dict[str, dict]:
        with self._lock:
            return {"spans_accepted": dict(self.spans_accepted),
                    "spans_rejected": dict(self.spans_rejected),
                    "requests_accepted": dict(self.requests_accepted),
                    "requests_refused": dict(self.requests_refused),
                    "logs_accepted": dict(self.logs_accepted),
                    "logs_rejected": dict(self.logs_rejected),
                    "logs_without_span": dict(self.logs_without_span),
                    "values_refused": dict(self.values_refused)}
