"""What each report column is called on screen, and what it counts (its tooltip).

The CSV names are fixed by docs/metrics.md §7/§8 and stay as they are in the CSV downloads;
on screen a column says what it counts, because the same word counts different things in
different reports: the weekly report's `runs` is every run, while its `exhaustion_rate` divides
by the runs with a known budget, and the utilisation report's `runs` counts only those.
"""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

# (label, what it counts), per report; docs/metrics.md says the same in its tables.
LABELS: dict[str, dict[str, tuple[str, str]]] = {
    "weekly": {
        "week": ("week", "ISO week (UTC, weeks start Monday)"),
        "partial_week": ("partial", "ticked when the time range or the present cuts the week "
                         "short: its counts are not the whole week's (partial_week)"),
        "agent": ("agent", "gen_ai.agent.name, else the resource's service.name"),
        "runs": ("runs (all)", "every run that started in the week, with or without a known "
                 "budget (runs in the CSV)"),
        "exhausted_runs": ("exhausted", "exhausted runs (exhausted_runs in the CSV)"),
        "exhaustion_rate": ("exhausted ÷ budgeted", "exhausted runs ÷ runs with a known "
                            "budget, not ÷ all runs (exhaustion_rate in the CSV)"),
        "utilisation_p50": ("util. p50", "median run utilisation, over runs with a known "
                            "budget (utilisation_p50)"),
        "utilisation_p90": ("p90", "90th percentile of run utilisation, over runs with a known "
                            "budget (utilisation_p90)"),
        "utilisation_p99": ("p99", "99th percentile of run utilisation, over runs with a known "
                            "budget (utilisation_p99)"),
        "steps": ("steps (all)", "every step, nested ones included (steps)"),
        "client_timeouts": ("client give-ups", "steps the client gave up on: client_timeout "
                            "(client_timeouts)"),
        "upstream_errors": ("upstream failures", "steps the upstream failed: upstream_error "
                            "(upstream_errors)"),
        "refused": ("refused", "steps not started: the budget left was too small (refused)"),
        "write_steps": ("write steps", "steps with budget.side_effect=write (write_steps)"),
        "reconciled_writes": ("reconciled", "writes with at least one reconciliation "
                              "step (reconciled_writes)"),
        "reconciliation_rate": ("reconciled ÷ writes", "reconciled writes ÷ write steps "
                                "(reconciliation_rate)"),
        "orphan_writes": ("orphans", "uncertain writes never reconciled (orphan_writes)"),
        "top_culprit": ("largest share", "the step key with the largest share of the "
                        "exhausted runs' budget (top_culprit): ranked by share, not by how many "
                        "runs it was the culprit of"),
        "top_culprit_share": ("its share", "that step key's share of the exhausted runs' budget "
                              "(top_culprit_share)"),
    },
    "utilisation": {
        "agent": ("agent", "the agent"),
        "runs": ("budgeted runs", "runs with a known budget: utilisation is undefined without "
                 "one (runs in the CSV)"),
        **{p: (p, f"{p} of run utilisation (elapsed ÷ budget), over budgeted runs")
           for p in ("p50", "p90", "p95", "p99")},
        "max": ("max", "the highest run utilisation"),
    },
    "step_utilisation": {
        "step_key": ("step key", "kind:name of the step"),
        "steps": ("steps", "steps of this key that carry budget.allocated_ms"),
        **{p: (p, f"{p} of step utilisation: duration ÷ budget.allocated_ms")
           for p in ("p50", "p90", "p95", "p99")},
        "max": ("max", "the highest step utilisation"),
        "mean_allocated_ms": ("mean allocated", "mean budget.allocated_ms of these steps"),
        "mean_duration_ms": ("mean duration", "mean duration of these steps"),
    },
    "attribution": {
        "step_key": ("step key", "kind:name of the step"),
        "budget_share": ("budget share", "Σ this key's consumption ÷ Σ budget, over the "
                         "exhausted runs (budget_share)"),
        "culprit_runs": ("culprit of (runs)", "exhausted runs in which this key spent the most "
                         "(culprit_runs)"),
        "holder_runs": ("holder of (runs)", "exhausted runs in which this key held the deadline "
                        "(holder_runs)"),
        "exhausted_runs": ("in exhausted runs", "exhausted runs with a step of this key "
                           "(exhausted_runs)"),
    },
    "failures": {
        "step_key": ("step key", "kind:name of the step"),
        "steps": ("steps (all)", "every step of this key, nested ones included (steps)"),
        "ok": ("ok", "steps that succeeded (ok)"),
        "client_timeouts": ("client give-ups", "client_timeout: our deadline fired "
                            "(client_timeouts)"),
        "upstream_errors": ("upstream failures", "upstream_error: 5xx, 429, UNAVAILABLE… "
                            "(upstream_errors)"),
        "refused": ("refused", "not started: the budget left was too small (refused)"),
        "cancelled": ("cancelled", "cancelled (cancelled)"),
        "client_errors": ("client errors", "client_error: 4xx, invalid requests "
                          "(client_errors)"),
        "errors": ("other errors", "any other error (errors)"),
    },
    "reconciliation": {
        "step_key": ("step key", "kind:name of the write step"),
        "write_steps": ("write steps", "steps with budget.side_effect=write"),
        "uncertain_writes": ("uncertain", "writes whose effect status is possible, or that "
                             "timed out or were cancelled (uncertain_writes)"),
        "reconciled_writes": ("reconciled", "writes with at least one reconciliation "
                              "(reconciled_writes)"),
        "orphan_writes": ("orphans", "uncertain writes never reconciled (orphan_writes)"),
        "reconciliation_rate": ("reconciled ÷ writes", "reconciled writes ÷ write steps "
                                "(reconciliation_rate)"),
        "landed": ("landed", "budget.reconcile.result landed (landed)"),
        "not_landed": ("not landed", "budget.reconcile.result not_landed (not_landed)"),
        "unknown": ("unknown", "budget.reconcile.result unknown, or not stated (unknown)"),
    },
}


def label(report: str, column: str) -> str:
    return LABELS.get(report, {}).get(column, (column, ""))[0]


def config(report: str, columns: Iterable[object]) -> dict[str, object]:
    """st.dataframe column_config giving each of `columns` its label and what it counts."""
    out: dict[str, object] = {}
    for column in columns:
        name = str(column)
        if name in LABELS.get(report, {}):
            shown, counts = LABELS[report][name]
            out[name] = st.column_config.Column(shown, help=counts)
    return out
