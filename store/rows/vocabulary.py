"""The vocabulary of docs/metrics.md in one place: the attributes of §2, and the names a step, a
run and a declaration can take (kinds, classes, outcomes, the conventions of docs/conventions.md,
budget sources).

Python code that lists one of these imports it from here. The SQL is generated from it where a
list is written into a query (store/derive/conventions.py renders CLASSES and RUN_OUTCOMES into both
derivations) and checked against it everywhere else: tests/store/test_vocabulary.py checks that
every attribute and every value below reaches both derivations (store/derive/sql/derive_refresh.sql
and store/clickhouse/sql/derive_build.sql, as rendered), except the values PASSED_THROUGH names, and
that no SQL file spells a word literal ('...') this module does not know.
"""

from __future__ import annotations

# docs/metrics.md §2: the budget.* attributes an instrumented agent sets (typed at ingest,
# store/rows/typed_attributes.py).
BUDGET_ATTRIBUTES = (
    "budget.total_ms", "budget.deadline_unix_ms", "budget.reserve_ms", "budget.run.outcome",
    "budget.step.kind", "budget.step.name", "budget.remaining_ms", "budget.cap_ms",
    "budget.allocated_ms", "budget.outcome", "budget.side_effect", "budget.effect_status",
    "budget.idempotency_key", "budget.attempt", "budget.hedge", "budget.reconcile.result",
    "budget.cleanup_ms",
)

# docs/metrics.md §2 budget.step.kind.
STEP_KINDS = ("model", "tool", "subagent", "backoff", "queue", "reconcile", "other")
# docs/metrics.md §3: a step's class, in its order (also the order of report columns and legends).
CLASSES = ("ok", "client_timeout", "upstream_error", "refused", "cancelled", "client_error",
           "error")
# docs/metrics.md §2 budget.run.outcome: the stated outcomes (a value outside the list counts as
# absent).
RUN_OUTCOMES = ("completed", "partial", "exhausted", "failed", "cancelled")
# docs/metrics.md §2 budget.side_effect, budget.effect_status, budget.reconcile.result.
SIDE_EFFECTS = ("read", "write")
EFFECT_STATUSES = ("none", "possible", "completed")
RECONCILE_RESULTS = ("landed", "not_landed", "unknown")
# docs/conventions.md: what a step was recognised from (store/derive/conventions.py
# StepRule.convention).
CONVENTIONS = ("budget", "otel_genai", "mcp", "openinference", "openllmetry", "vercel_ai",
               "rpc", "http")
# docs/guide.md#declaring-budgets: where a run's budget came from, and the scopes a budget is
# declared for.
BUDGET_SOURCES = ("span", "declared")
DECLARED_SCOPES = ("agent", "default")
# What `budgetscope budgets list` shows: a declared budget, or a declared per-step cap (scope step).
DECLARATIONS = ("budget", "cap")
DECLARATION_SCOPES = (*DECLARED_SCOPES, "step")
# docs/metrics.md §3, docs/conventions.md: the OpenTelemetry span event (and log record) that
# carries an exception. Of the SQL only derive_build.sql spells it: on DuckDB the events are picked
# at ingest (the flatteners of ingest/decode/ import it from here), so it is not in VOCABULARY's
# both-ways check.
EXCEPTION_EVENT = "exception"
# docs/conventions.md: why a candidate step is a wrapper after all (derive_recognise.sql: one call
# recorded as two spans, a row-11 operation with a step below it), what the derivation notes on a
# trace it could not treat in full (derivation_notes), and what `budgetscope run --spans` says each
# span is (store/derive/explain.py).
WRAPPER_REASONS = ("twin", "over_steps", "event_record", "preparation")
DERIVATION_NOTES = ("http_beside_tool_skipped", "spans_capped", "runs_nested_too_deep",
                    "walk_depth_capped", "usage_values_ignored")
SPAN_ROLES = ("run", "step", "transparent", "twin", "part", "wrapper", "outside")
# docs/metrics.md §11: the budgets a run or a refusal names (budget.run.exhausted_by,
# budget.refused_by); where a span's or a step's cost came from (a step of several: mixed);
# the quantities a price has (store/file/schema/prices.sql). Not in VOCABULARY's both-ways
# check until the ClickHouse derivation computes §11 too.
BUDGET_DIMENSIONS = ("time", "tokens", "usd")
COST_SOURCES = ("reported", "override", "bundled", "unpriced")
STEP_COST_SOURCES = (*COST_SOURCES, "mixed")
PRICE_QUANTITIES = ("input", "cache_read", "cache_write", "output", "reasoning", "request")

VOCABULARY: dict[str, tuple[str, ...]] = {
    "STEP_KINDS": STEP_KINDS,
    "CLASSES": CLASSES,
    "RUN_OUTCOMES": RUN_OUTCOMES,
    "SIDE_EFFECTS": SIDE_EFFECTS,
    "EFFECT_STATUSES": EFFECT_STATUSES,
    "RECONCILE_RESULTS": RECONCILE_RESULTS,
    "CONVENTIONS": CONVENTIONS,
    "BUDGET_SOURCES": BUDGET_SOURCES,
    "DECLARED_SCOPES": DECLARED_SCOPES,
}

# Values a derivation never needs to spell: it stores the attribute as the agent sent it
# (typed as a label) and no documented rule tests for that value.
PASSED_THROUGH: dict[str, frozenset[str]] = {
    "STEP_KINDS": frozenset({"backoff", "queue"}),  # only model/tool/reconcile/... are tested
    "SIDE_EFFECTS": frozenset({"read"}),  # only `write` makes a write step
    "EFFECT_STATUSES": frozenset({"none"}),  # only `possible` makes a write uncertain
    "RECONCILE_RESULTS": frozenset({"landed", "not_landed"}),  # `unknown` is the default
}

# Word literals of the SQL files that are not vocabulary but SQL plumbing, and why.
NOT_VOCABULARY: dict[str, str] = {
    "n": "a struct field name of derive_refresh.sql's error texts",
    "c": "a struct field name of derive_refresh.sql's error texts",
    "trace_id": "a struct field name of derive_refresh.sql's span links",
    "span_id": "a struct field name of derive_refresh.sql's span links",
    "true": "an attribute's boolean spelled as text (derive_build.sql, as ingest's as_bool)",
    "false": "an attribute's boolean spelled as text (derive_build.sql, as ingest's as_bool)",
    "yes": "an attribute's boolean spelled as text (derive_build.sql, as ingest's as_bool)",
    "no": "an attribute's boolean spelled as text (derive_build.sql, as ingest's as_bool)",
    "week": "a date_trunc unit",
    "budgetscope_root_cutoff": "the DuckDB variable the derivation's caller sets "
                               "(store/derive/statements.py's set_root_cutoff)",
    "step": "a struct field name of derive_measure.sql's crossings",
    "before": "a struct field name of derive_measure.sql's crossings",
    "after": "a struct field name of derive_measure.sql's crossings",
    "ref": "a struct field name of derive_cost.sql's rates",
    "key": "a struct field name of derive_measure.sql's culprits",
    "spent": "a struct field name of derive_measure.sql's culprits",
    "start_ns": "a struct field name of derive_measure.sql's culprits",
    "genai_prices_version": "the budgetscope_meta key of the bundled price table's version "
                            "(store/prices/bundled.py)",
}


def known_words() -> frozenset[str]:
    """Every word literal a SQL file may spell."""
    words = {value for values in VOCABULARY.values() for value in values}
    return frozenset(words | set(DECLARATIONS) | set(DECLARATION_SCOPES) | {EXCEPTION_EVENT}
                     | set(WRAPPER_REASONS) | set(DERIVATION_NOTES) | set(SPAN_ROLES)
                     | set(BUDGET_DIMENSIONS) | set(STEP_COST_SOURCES) | set(PRICE_QUANTITIES)
                     | set(NOT_VOCABULARY))
