-- name: declared_tables
-- The declared budgets and step caps on ClickHouse (as derive_build.sql step 0 creates them; DuckDB's are store/file/schema/declared_budgets.sql).
CREATE TABLE IF NOT EXISTS budgetscope_declared_budgets (
    scope String, agent String, budget_ms Int64, declared_at DateTime64(3, 'UTC')
) ENGINE = MergeTree ORDER BY (scope, agent);
CREATE TABLE IF NOT EXISTS budgetscope_declared_step_caps (
    step_key String, cap_ms Int64, declared_at DateTime64(3, 'UTC')
) ENGINE = MergeTree ORDER BY step_key;
