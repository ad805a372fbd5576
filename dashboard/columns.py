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
                         "short: its counts are not the whole week's"),
        "agent": ("agent", "gen_ai.agent.name, else the resource's service.name"),
        "runs": ("runs (all)", "every run that started in the week, with or without a known "
                 "budget"),
        "budgeted_runs": ("budgeted", "runs with a known budget: what the exhaustion rate and "
                          "the utilisation percentiles divide by"),
        "exhausted_runs": ("exhausted", "exhausted runs"),
        "exhaustion_rate": ("exh. ÷ budgeted", "exhausted runs ÷ runs with a known "
                            "budget, not ÷ all runs"),
        "utilisation_p50": ("util. p50", "median run utilisation, over runs with a known "
                            "budget"),
        "utilisation_p90": ("p90", "90th percentile of run utilisation, over runs with a known "
                            "budget"),
        "utilisation_p99": ("p99", "99th percentile of run utilisation, over runs with a known "
                            "budget"),
        "steps": ("steps (all)", "every step, nested ones included"),
        "client_timeouts": ("client give-ups", "steps the client gave up on: client_timeout"),
        "upstream_errors": ("upstream failures", "steps the upstream failed: upstream_error"),
        "refused": ("refused", "steps not started: the budget left was too small"),
        "write_steps": ("write steps", "steps with budget.side_effect=write"),
        "reconciled_writes": ("reconciled", "writes with at least one reconciliation "
                              "step"),
        "reconciliation_rate": ("reconciled ÷ writes", "reconciled writes ÷ write steps"),
        "orphan_writes": ("orphans", "uncertain writes never reconciled"),
        "top_culprit": ("largest share", "the step key with the largest share of the "
                        "exhausted runs' budget: ranked by share, not by how many "
                        "runs it was the culprit of"),
        "top_culprit_share": ("its share", "that step key's share of the exhausted runs' budget"),
        # docs/metrics.md §7, §11.9: the cost columns, after partial_week in the CSV
        "tokens": ("tokens", "tokens of the week's metered calls (input with its cache, "
                   "output with its reasoning)"),
        "cost_usd": ("cost", "known cost of the week's runs: a lower bound when some cost is "
                     "incomplete"),
        "incomplete_cost_runs": ("cost incomplete", "runs whose cost is a lower bound: an "
                                 "unpriced call, or a model step with no usage that may have "
                                 "been billed"),
        "unpriced_steps": ("unpriced", "top-level steps with a call that has no price"),
        "unmetered_billable_steps": ("unmetered", "model steps that sent no usage and were "
                                     "probably billed"),
        "usd_budgeted_runs": ("$-budgeted", "runs with a known dollar budget, or one enforced "
                              "elsewhere: what the $ exhaustion rate divides by"),
        "usd_exhausted_runs": ("$-exhausted", "runs that spent, or were stopped at, their "
                               "dollar budget"),
        "usd_exhaustion_rate": ("$-exhausted ÷ $-budgeted", "dollar-exhausted runs ÷ runs "
                                "budgeted in dollars"),
        "cost_utilisation_p50": ("cost util. p50", "median of cost ÷ dollar budget, over runs "
                                 "with a known dollar budget"),
        "cost_utilisation_p90": ("p90", "90th percentile of cost ÷ dollar budget"),
        "cost_utilisation_p99": ("p99", "99th percentile of cost ÷ dollar budget"),
        "overrun_usd": ("over budget", "Σ of what the week's dollar-budgeted runs spent past "
                        "their budget"),
        "top_cost_culprit": ("largest $ share", "the step key with the largest Σ spend over "
                             "the week's dollar-exhausted runs"),
        "top_cost_culprit_share": ("its share", "that Σ ÷ those runs' Σ dollar budget (not "
                                   "clipped: parallel calls each pay in full)"),
        "token_budgeted_runs": ("token-budgeted", "runs with a known token budget, or one "
                                "enforced elsewhere"),
        "token_exhausted_runs": ("token-exhausted", "runs that used, or were stopped at, their "
                                 "token budget"),
        "token_utilisation_p90": ("token util. p90", "90th percentile of tokens ÷ token "
                                  "budget"),
        "weekly_budget_usd": ("weekly $ budget", "the agent's declared weekly dollar budget "
                              "(budgets set --usd-per-week), else the default's"),
        "weekly_budget_utilisation": ("of it spent", "the week's cost ÷ the weekly dollar "
                                      "budget"),
    },
    "utilisation": {
        "agent": ("agent", "the agent"),
        "runs": ("budgeted runs", "runs with a known budget: utilisation is undefined without "
                 "one"),
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
                         "exhausted runs"),
        "culprit_runs": ("culprit of (runs)", "exhausted runs in which this key spent the most"),
        "holder_runs": ("holder of (runs)", "exhausted runs in which this key held the deadline"),
        "exhausted_runs": ("in exhausted runs", "exhausted runs with a step of this key"),
    },
    "failures": {
        "step_key": ("step key", "kind:name of the step"),
        "steps": ("steps (all)", "every step of this key, nested ones included"),
        "ok": ("ok", "steps that succeeded"),
        "client_timeouts": ("client give-ups", "client_timeout: our deadline fired"),
        "upstream_errors": ("upstream failures", "upstream_error: 5xx, 429, UNAVAILABLE…"),
        "refused": ("refused", "not started: the budget left was too small"),
        "cancelled": ("cancelled", "cancelled"),
        "client_errors": ("client errors", "client_error: 4xx, invalid requests"),
        "errors": ("other errors", "any other error"),
    },
    "reconciliation": {
        "step_key": ("step key", "kind:name of the write step"),
        "write_steps": ("write steps", "steps with budget.side_effect=write"),
        "uncertain_writes": ("uncertain", "writes whose effect status is possible, or that "
                             "timed out or were cancelled"),
        "reconciled_writes": ("reconciled", "writes with at least one reconciliation"),
        "orphan_writes": ("orphans", "uncertain writes never reconciled"),
        "reconciliation_rate": ("reconciled ÷ writes", "reconciled writes ÷ write steps"),
        "landed": ("landed", "budget.reconcile.result landed"),
        "not_landed": ("not landed", "budget.reconcile.result not_landed"),
        "unknown": ("unknown", "budget.reconcile.result unknown, or not stated"),
    },
}


def label(report: str, column: str) -> str:
    return LABELS.get(report, {}).get(column, (column, ""))[0]


def help_text(report: str, column: str) -> str:
    """What the column counts, then its name in the CSV: the header on screen says what it
    counts, the tooltip how to find it in the download and in `budgetscope report`."""
    counts = LABELS.get(report, {}).get(column, (column, ""))[1]
    return f"{counts} — CSV column: {column}" if counts else f"CSV column: {column}"


def config(report: str, columns: Iterable[object]) -> dict[str, object]:
    """st.dataframe column_config giving each of `columns` its label and what it counts."""
    out: dict[str, object] = {}
    for column in columns:
        name = str(column)
        if name in LABELS.get(report, {}):
            out[name] = st.column_config.Column(LABELS[report][name][0],
                                                help=help_text(report, name))
    return out
