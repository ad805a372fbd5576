"""What `budgetscope serve` adds to /metrics besides the receivers' own counters: the product's
signals over a recent window (queries.signals, on a reader cursor of the owner) and retention's
totals. Kept here because it wires queries to ingest, which must not import queries."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from prometheus_client.metrics_core import Metric

from budgetscope.durations import window_label
from budgetscope.server.operations import counter, gauge
from queries.filters import Filters
from queries.signals import Signals, recent_signals
from store import DatabaseOwner, RetentionSchedule

# (field of queries.signals.Signals, metric name, help)
SIGNALS = (
    ("runs", "budgetscope_recent_runs", "Runs that started in the window."),
    ("exhausted_runs", "budgetscope_recent_exhausted_runs",
     "Exhausted runs (docs/metrics.md §4) among those that started in the window."),
    ("exhaustion_rate", "budgetscope_recent_exhaustion_rate",
     "Exhausted runs / runs with a known budget; NaN without budgeted runs."),
    ("client_timeouts", "budgetscope_recent_client_giveups",
     "Steps whose class is client_timeout (our deadline fired)."),
    ("client_timeout_rate", "budgetscope_recent_client_giveup_rate",
     "client_timeout steps / steps; NaN without steps."),
    ("upstream_errors", "budgetscope_recent_upstream_failures",
     "Steps whose class is upstream_error (their availability)."),
    ("upstream_error_rate", "budgetscope_recent_upstream_failure_rate",
     "upstream_error steps / steps; NaN without steps."),
    ("write_steps", "budgetscope_recent_write_steps", "Write steps (docs/metrics.md §6)."),
    ("reconciliation_rate", "budgetscope_recent_reconciliation_rate",
     "Reconciled writes / write steps (docs/metrics.md §6); NaN without writes."),
    ("orphan_writes", "budgetscope_recent_orphan_writes",
     "Uncertain writes nobody read back (docs/metrics.md §6)."),
    ("usd_exhaustion_rate", "budgetscope_recent_usd_exhaustion_rate",
     "Dollar-exhausted runs / runs with a dollar budget (docs/metrics.md §11.5); NaN without "
     "such runs."),
    ("token_exhaustion_rate", "budgetscope_recent_token_exhaustion_rate",
     "Token-exhausted runs / runs with a token budget (docs/metrics.md §11.5); NaN without "
     "such runs."),
    ("tokens", "budgetscope_recent_tokens",
     "Tokens of the metered calls of the runs that started in the window (docs/metrics.md "
     "§11.4)."),
    ("cost_usd", "budgetscope_recent_cost_usd",
     "Known cost in dollars of the runs that started in the window (docs/metrics.md §11.4): a "
     "lower bound while budgetscope_recent_unpriced_steps is above 0."),
    ("unpriced_steps", "budgetscope_recent_unpriced_steps",
     "Top-level steps with a call of no known price (docs/metrics.md §11.4)."),
    ("weekly_budget_utilisation", "budgetscope_recent_weekly_budget_utilisation",
     "The largest share of an agent's weekly dollar budget spent in an ISO week, over the "
     "window's runs (docs/metrics.md §11.8); NaN without a weekly budget."),
)


def signal_families(owner: DatabaseOwner, length: dt.timedelta,
                    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
                    ) -> Callable[[], list[Metric]]:
    """A /metrics source: the signals over the runs that started in the last `length`."""
    label = {"window": window_label(length)}

    def families() -> list[Metric]:
        cursor = owner.cursor()
        try:
            signals = recent_signals(cursor, Filters.ending(clock(), length))
        finally:
            cursor.close()
        return [gauge(name, text, _gauge_value(signals, field), label)
                for field, name, text in SIGNALS]

    return families


def _gauge_value(signals: Signals, field: str) -> float:
    """A signal as a gauge's float: NaN when undefined; the cost in dollars (a Prometheus
    sample is a float whatever we hold: the exact nano-dollars stay in the reports)."""
    if field == "cost_usd":
        return signals.cost_nano / 1e9
    value = signals.value(field)
    return float("nan") if value is None else float(value)


def retention_families(schedule: RetentionSchedule) -> Callable[[], list[Metric]]:
    def families() -> list[Metric]:
        last = schedule.last
        return [
            counter("budgetscope_retention_passes_total", "Retention passes finished.",
                    schedule.passes),
            counter("budgetscope_retention_traces_removed_total",
                    "Traces removed whole by retention.", schedule.traces_removed),
            counter("budgetscope_retention_spans_removed_total", "Spans removed by retention.",
                    schedule.spans_removed),
            gauge("budgetscope_retention_last_seconds", "Duration of the last retention pass.",
                  last.seconds if last else 0.0),
        ]

    return families
