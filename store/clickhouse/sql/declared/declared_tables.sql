-- name: declared_tables
-- The declared budgets and step caps on ClickHouse (as derive_build.sql step 0 creates them; DuckDB's are store/file/schema/declared_budgets.sql).
CREATE TABLE IF NOT EXISTS budgetscope_declared_budgets (
    scope String, agent String, budget_ms Nullable(Int64), declared_at DateTime64(3, 'UTC'),
    tokens Nullable(Int64), usd_nano Nullable(Int64), usd_per_week_nano Nullable(Int64)
) ENGINE = MergeTree ORDER BY (scope, agent);
-- docs/metrics.md §11.5: a declaration's token and dollar dimensions, beside its duration
-- (a table made before them gains them; each dimension may be left unset)
ALTER TABLE budgetscope_declared_budgets ADD COLUMN IF NOT EXISTS tokens Nullable(Int64);
ALTER TABLE budgetscope_declared_budgets ADD COLUMN IF NOT EXISTS usd_nano Nullable(Int64);
ALTER TABLE budgetscope_declared_budgets
    ADD COLUMN IF NOT EXISTS usd_per_week_nano Nullable(Int64);
ALTER TABLE budgetscope_declared_budgets MODIFY COLUMN budget_ms Nullable(Int64);
CREATE TABLE IF NOT EXISTS budgetscope_declared_step_caps (
    step_key String, cap_ms Int64, declared_at DateTime64(3, 'UTC')
) ENGINE = MergeTree ORDER BY step_key;
