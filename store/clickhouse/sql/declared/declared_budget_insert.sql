-- name: declared_budget_insert
-- Declare the budget of (scope, agent), each dimension given or NULL, after declared_budget_delete removed the previous one (store/clickhouse/declared.py merges the dimensions kept).
INSERT INTO budgetscope_declared_budgets
    (scope, agent, budget_ms, declared_at, tokens, usd_nano, usd_per_week_nano)
SELECT {scope:String}, {agent:String}, {budget_ms:Nullable(Int64)}, now64(3),
       {tokens:Nullable(Int64)}, {usd_nano:Nullable(Int64)}, {usd_per_week_nano:Nullable(Int64)}
