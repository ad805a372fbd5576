"""The overview's changes against the previous period, under AppTest on the bundled sample:
counts whose traffic differs change as rates per 100 steps (per 100 write steps for orphans),
each change is coloured by whether it is good or bad, and a change of zero is not coloured."""

from __future__ import annotations

import pytest
from streamlit.proto.Metric_pb2 import Metric

from dashboard import summaries
from queries.filters import Filters
from tests.support.apptest import PREVIOUS, open_page, query

# A rise of each of these is bad: red when it rises, green when it falls.
RISE_IS_BAD = ("Exhaustion rate", "Utilisation p99", "Client give-ups", "Upstream failures",
               "Reconciliation rate", "Orphan writes")


def _totals(db: str, filters: object = None) -> summaries.PeriodTotals:
    if filters is None:
        return summaries.period_totals(query(db, "headline"))
    return summaries.period_totals(query(db, "headline", filters))  # type: ignore[arg-type]


def _expected(change: float, unit: str) -> str:
    shown = f"{change:+.1f}"
    return "±0" if float(shown) == 0 else shown + unit


def test_overview_changes_are_rates_coloured_by_direction(db: str) -> None:
    at = open_page("overview")
    now, before = _totals(db), _totals(db, PREVIOUS)
    shown = {m.label: m for m in at.metric}
    assert shown["Client give-ups"].delta == _expected(
        now.client_timeouts_per_100_steps - before.client_timeouts_per_100_steps,
        " per 100 steps")
    assert shown["Upstream failures"].delta == _expected(
        now.upstream_errors_per_100_steps - before.upstream_errors_per_100_steps,
        " per 100 steps")
    assert shown["Orphan writes"].delta == _expected(
        now.orphan_writes_per_100_writes - before.orphan_writes_per_100_writes,
        " per 100 writes")
    assert shown["Reconciliation rate"].delta == _expected(
        (now.reconciliation_rate - before.reconciliation_rate) * 100, " pp")
    # the counts behind the rates are the queries' steps
    assert now.steps == int(query(db, "failures")["steps"].sum())
    assert now.client_timeouts_per_100_steps == pytest.approx(
        100 * now.client_timeouts / now.steps)

    def colour(label: str) -> str:
        return Metric.MetricColor.Name(shown[label].proto.color)

    for label in RISE_IS_BAD:
        delta = shown[label].delta
        if delta == "±0":
            assert colour(label) == "GRAY", label
        elif delta.startswith("+"):
            assert colour(label) == "RED", (label, delta)
        else:
            assert colour(label) == "GREEN", (label, delta)
    assert colour("Runs") == "GRAY"  # the traffic itself is neither good nor bad


def test_a_change_of_zero_is_not_coloured(db: str) -> None:
    # In the sample's last week the upstream failures per 100 steps are those of the week
    # before, to the decimal shown.
    since, until = "2026-11-23", "2026-11-30"
    at = open_page("overview", {"range": "custom", "since": since, "until": until})
    now = _totals(db, Filters.parse(since, until))
    before = _totals(db, Filters.parse("2026-11-16", since))
    assert _expected(now.upstream_errors_per_100_steps - before.upstream_errors_per_100_steps,
                     "") == "±0"
    upstream = next(m for m in at.metric if m.label == "Upstream failures")
    assert upstream.delta == "±0"
    assert Metric.MetricColor.Name(upstream.proto.color) == "GRAY"
    assert Metric.MetricDirection.Name(upstream.proto.direction) == "NONE"
