"""The operator's pages on serve's OTLP/HTTP port: GET /healthz, /readyz and /metrics, handed
to the receivers as routes (`OperatorPages.routes()`).

- /healthz (liveness): 200 while the process answers and its writer thread runs; 503 once the
  writer thread has died (only a restart helps then).
- /readyz (readiness): 200 while the writer keeps up: the queue below `max_queued_spans`, its
  oldest batch waiting less than `max_wait_seconds`, and, when anything is waiting, a commit
  within `max_commit_age_seconds`. Otherwise 503 with the reason, so that a load balancer sends
  exporters elsewhere before they start getting 503s from /v1/traces. Traces whose derivation
  failed (store/derive/pending.py) leave it ready, with the count in the body: they are confined
  to themselves, and another replica or a restart would not derive them either.
- /metrics: Prometheus text format (prometheus_client's exposition, with OperatorPages as the
  collector asked at each scrape: no process-global registry, so two servers in one process
  never share a metric): the receivers' counters, the writer's queue and commit latency, and
  families added by the caller (the product's signals over a recent window, retention), those
  cached for `cache_seconds` so that scrapes do not query the database each time.

Health and readiness need no bearer token: Kubernetes probes and load balancers send none, and
the pages say nothing about the data. /metrics does require it when one is configured (a
Prometheus scrape config carries it with `authorization: {credentials: …}`): it shows the
product's figures.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ingest.receivers.auth import BearerToken
from ingest.receivers.counters import ReceiverCounters
from ingest.receivers.http_routes import Endpoint, Head, Reply, Request
from store import GroupCommitter

_LOG = logging.getLogger("budgetscope.operations")
TEXT = "text/plain; charset=utf-8"
TRANSPORTS = ("http", "grpc")
Answer = tuple[int, str, bytes, dict[str, str]]
FamilySource = Callable[[], Iterable[Metric]]
# A GET page: given the request's Authorization header, it answers (status, content type,
# body, extra headers).
Page = Callable[[str | None], Answer]


def counter(name: str, text: str, value: float | None = None,
            labelled: Mapping[tuple[str, ...], float] | None = None,
            labels: tuple[str, ...] = ()) -> CounterMetricFamily:
    """A counter family: one `value`, or one sample per label-value tuple of `labelled`."""
    family = CounterMetricFamily(name, text, value=value, labels=labels if labelled is not None
                                 else None)
    for label_values, count in (labelled or {}).items():
        family.add_metric(list(label_values), count)
    return family


def gauge(name: str, text: str, value: float,
          labels: Mapping[str, str] | None = None) -> GaugeMetricFamily:
    if not labels:
        return GaugeMetricFamily(name, text, value=value)
    family = GaugeMetricFamily(name, text, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


class PageEndpoint:
    """A GET page as a route of the OTLP/HTTP port (ingest/receivers/http_routes.py), answered
    in the receiver's small pool of pages, never in the exports' pool. A `probe` answers any
    Host and takes no token (host_check.py)."""

    methods = ("GET",)
    exports = False
    otlp = False
    max_body_bytes = None
    pool = None

    def __init__(self, page: Page, *, probe: bool = False) -> None:
        self.page = page
        self.probe = probe

    def admit(self, head: Head) -> Reply | None:
        return None

    def respond(self, request: Request) -> Reply:
        status, content_type, body, headers = self.page(request.head.headers.get("Authorization"))
        return Reply(status, content_type, body, dict(headers))


class Readiness:
    """Whether the single writer keeps up; `reason()` is None when ready."""

    def __init__(self, committer: GroupCommitter, *, max_queued_spans: int | None = None,
                 max_wait_seconds: float | None = None,
                 max_commit_age_seconds: float | None = None) -> None:
        self.committer = committer
        # Half of the limits at which submit() starts refusing: not ready comes first.
        self.max_queued_spans = max_queued_spans or committer.max_queued_spans // 2
        self.max_wait_seconds = max_wait_seconds or committer.max_lag_seconds / 2
        self.max_commit_age_seconds = max_commit_age_seconds or committer.max_lag_seconds
        self._started = time.monotonic()

    def reason(self) -> str | None:
        committer = self.committer
        if not committer.alive:
            return "the writer thread has stopped"
        stats = committer.stats
        if stats.last_failure_at is not None and (
                stats.last_commit_at is None or stats.last_failure_at > stats.last_commit_at):
            return (f"the last write failed ({stats.last_failure.splitlines()[0][:200]}); "
                    "ready again once a write succeeds")
        queued = committer.queued_spans
        if queued > self.max_queued_spans:
            return (f"writer queue holds {queued:,} spans (ready below "
                    f"{self.max_queued_spans:,})")
        waited = committer.oldest_queued_seconds
        if waited > self.max_wait_seconds:
            return (f"oldest queued batch has waited {waited:.1f} s (ready below "
                    f"{self.max_wait_seconds:g} s)")
        if queued:
            last = committer.stats.last_commit_at or self._started
            age = time.monotonic() - last
            if age > self.max_commit_age_seconds:
                return (f"no commit for {age:.1f} s with {queued:,} spans waiting (ready "
                        f"within {self.max_commit_age_seconds:g} s)")
        return None


class OperatorPages(Collector):
    """The three pages; also the /metrics collector, whose collect() builds the families anew
    at each scrape from the counters and the writer (and the cached sources)."""

    def __init__(self, committer: GroupCommitter, counters: ReceiverCounters,
                 token: BearerToken, *, readiness: Readiness | None = None,
                 sources: Iterable[FamilySource] = (), cache_seconds: float = 5.0) -> None:
        self.committer = committer
        self.counters = counters
        self.token = token
        self.readiness = readiness or Readiness(committer)
        self.sources = list(sources)
        self.cache_seconds = cache_seconds
        self._cache: tuple[float, list[Metric]] | None = None
        self._cache_lock = threading.Lock()

    def routes(self) -> dict[str, Endpoint]:
        """The three pages as routes: the probes open to any Host, /metrics behind the token
        and the Host check as every route that shows data."""
        return {"/healthz": PageEndpoint(self.healthz, probe=True),
                "/readyz": PageEndpoint(self.readyz, probe=True),
                "/metrics": PageEndpoint(self.metrics)}

    def healthz(self, authorization: str | None) -> Answer:
        if not self.committer.alive:
            return 503, TEXT, b"not alive: the writer thread has stopped\n", {}
        return 200, TEXT, b"ok\n", {}

    def readyz(self, authorization: str | None) -> Answer:
        reason = self.readiness.reason()
        if reason is not None:
            return 503, TEXT, f"not ready: {reason}\n".encode(), {"Retry-After": "2"}
        failed = self.committer.derivation_failed_traces
        if failed:
            # Still ready: a trace that cannot be derived is confined to itself (its spans are
            # stored, every other trace is derived); routing exporters elsewhere or restarting
            # would not help, so the probe must not take the server out of service for it.
            return 200, TEXT, (f"ready; {failed:,} trace(s) could not be derived, their runs "
                               "and steps stay as last derived (budgetscope_derivation_failed_"
                               "traces in /metrics, the errors in the log)\n").encode(), {}
        return 200, TEXT, b"ready\n", {}

    def metrics(self, authorization: str | None) -> Answer:
        if not self.token.allows(authorization):
            return (401, TEXT, b"missing or wrong bearer token\n",
                    {"WWW-Authenticate": "Bearer"})
        return 200, CONTENT_TYPE_PLAIN_0_0_4, generate_latest(self), {}

    def collect(self) -> Iterator[Metric]:
        yield from self.writer_families()
        yield from self._cached_sources()

    def _cached_sources(self) -> list[Metric]:
        with self._cache_lock:  # one scrape computes, concurrent ones wait for its result
            now = time.monotonic()
            if self._cache is not None and now - self._cache[0] < self.cache_seconds:
                return self._cache[1]
            families: list[Metric] = []
            for source in self.sources:
                try:
                    families.extend(source())
                except Exception as error:  # noqa: BLE001 - a scrape must still answer
                    _LOG.error("metrics source failed: %s", error,
                               extra={"event": "metrics_failed", "error": str(error)})
            self._cache = (now, families)
            return families

    def _log_families(self, counts: dict[str, dict]) -> list[Metric]:
        """OTLP log records, counted as spans are; records without a span context, or whose
        span is not stored when they are, are kept and counted (never an error)."""
        accepted, rejected = counts["logs_accepted"], counts["logs_rejected"]
        received = {t: accepted.get(t, 0) + sum(v for (tr, _), v in rejected.items() if tr == t)
                    for t in TRANSPORTS}
        stats = self.committer.stats
        by_transport = ("transport",)
        return [
            counter("budgetscope_log_records_received_total",
                    "OTLP log records in requests decoded and answered with success "
                    "(accepted + rejected).",
                    labelled={(t,): received[t] for t in TRANSPORTS}, labels=by_transport),
            counter("budgetscope_log_records_accepted_total",
                    "Log records acknowledged: committed before the answer (resent duplicates "
                    "included).",
                    labelled={(t,): accepted.get(t, 0) for t in TRANSPORTS},
                    labels=by_transport),
            counter("budgetscope_log_records_rejected_total",
                    "Log records refused inside an acknowledged request, by reason.",
                    labelled=dict(sorted(rejected.items())), labels=("transport", "reason")),
            counter("budgetscope_log_records_without_span_total",
                    "Accepted log records with no span context (kept; they are no span's "
                    "evidence).",
                    labelled={(t,): counts["logs_without_span"].get(t, 0) for t in TRANSPORTS},
                    labels=by_transport),
            counter("budgetscope_log_records_stored_total",
                    "Log records newly stored (not already present).", stats.logs_inserted),
            counter("budgetscope_log_records_span_missing_total",
                    "Newly stored log records whose span was not stored at that moment (kept: "
                    "the span may still come).", stats.logs_span_missing),
        ]

    def writer_families(self) -> list[Metric]:
        counts = self.counters.snapshot()
        stats = self.committer.stats
        accepted, rejected = counts["spans_accepted"], counts["spans_rejected"]
        received = {t: accepted.get(t, 0) + sum(v for (tr, _), v in rejected.items() if tr == t)
                    for t in TRANSPORTS}
        histogram = stats.commit_seconds.snapshot()
        by_transport = ("transport",)
        return [
            counter("budgetscope_spans_received_total",
                    "Spans in requests decoded and answered with success (accepted + rejected).",
                    labelled={(t,): received[t] for t in TRANSPORTS}, labels=by_transport),
            counter("budgetscope_spans_accepted_total",
                    "Spans acknowledged: committed before the answer (resent duplicates "
                    "included).",
                    labelled={(t,): accepted.get(t, 0) for t in TRANSPORTS},
                    labels=by_transport),
            counter("budgetscope_spans_rejected_total",
                    "Spans refused inside an acknowledged request (partial_success), by reason.",
                    labelled=dict(sorted(rejected.items())), labels=("transport", "reason")),
            counter("budgetscope_values_refused_total",
                    "Values left out of, or replaced in, spans that were stored (a budget.* "
                    "number out of range or not a number; a resource's invalid UTF-8), by "
                    "reason.",
                    labelled={(r,): v for r, v in sorted(counts["values_refused"].items())},
                    labels=("reason",)),
            counter("budgetscope_requests_refused_total",
                    "Requests refused whole (their spans were not decoded or not acknowledged),"
                    " by reason.",
                    labelled=dict(sorted(counts["requests_refused"].items())),
                    labels=("transport", "reason")),
            counter("budgetscope_spans_stored_total",
                    "Spans newly stored (acknowledged spans that were not already stored).",
                    stats.spans_inserted),
            *self._log_families(counts),
            gauge("budgetscope_writer_queue_spans", "Spans decoded and waiting for the writer.",
                  self.committer.queued_spans),
            gauge("budgetscope_writer_oldest_wait_seconds",
                  "How long the oldest queued batch has waited (0 when none).",
                  round(self.committer.oldest_queued_seconds, 6)),
            gauge("budgetscope_derivation_lag_seconds",
                  "How long the oldest commit whose runs and steps are not derived yet has "
                  "waited (0 when all are).", round(self.committer.derivation_lag_seconds, 6)),
            gauge("budgetscope_derivation_failed_traces",
                  "Traces whose runs and steps could not be derived (each alone; every other "
                  "trace is derived; /readyz stays ready and names them).",
                  self.committer.derivation_failed_traces),
            gauge("budgetscope_runs_root_missing",
                  "Runs measured from their earliest span because their root span never "
                  "arrived within the grace period (docs/conventions.md, 'A trace without "
                  "its root').", self.committer.root_missing_runs),
            gauge("budgetscope_traces_awaiting_root",
                  "Traces with spans stored but no run yet: their root has not arrived and "
                  "the grace period has not passed.", self.committer.awaiting_root),
            HistogramMetricFamily(
                "budgetscope_writer_commit_seconds", "Duration of each group-commit transaction.",
                buckets=[(floatToGoString(bound), count) for bound, count in
                         zip([*histogram.bounds, math.inf], histogram.cumulative, strict=True)],
                sum_value=histogram.total),
            counter("budgetscope_writer_failed_transactions_total",
                    "Transactions that failed (their requests were answered 503).",
                    stats.failed_transactions),
            gauge("budgetscope_ready", "1 when /readyz answers ready, else 0.",
                  0 if self.readiness.reason() else 1),
        ]
