"""Runs, steps and metered spans from the stored spans (docs/metrics.md §1-§6, §11,
docs/conventions.md, docs/guide.md#declaring-budgets).

- statements.py runs the derivation's SQL (sql/), whose `/*@name*/` markers are filled from
  conventions.py (docs/conventions.md and docs/metrics.md §3, §11's spellings as data, which the
  ClickHouse derivation is rendered from too); the tokens and dollars are derive_usage.sql and
  derive_cost.sql;
- pending.py owns the marks the writer leaves (sql/pending/): it derives the marked traces in
  slices, and confines a trace that fails to itself;
- scheduling.py says when: every trigger of the derivation, and its pace;
- explain.py says why each span of a trace is, or is not, a step, from the derivation itself.
"""
