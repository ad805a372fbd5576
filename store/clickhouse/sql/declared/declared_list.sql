-- name: declared_list
-- Every declared budget (with each of its dimensions) and cap, the default first (as store/declared/sql/declared_list.sql).
SELECT what, scope, target, duration_ms,
       formatDateTime(declared_at, '%Y-%m-%dT%H:%i:%SZ', 'UTC') AS declared_at, tokens,
       usd_nano, usd_per_week_nano FROM (
    SELECT 'budget' AS what, scope, nullIf(agent, '') AS target, budget_ms AS duration_ms,
           declared_at, tokens, usd_nano, usd_per_week_nano
    FROM budgetscope_declared_budgets
    UNION ALL
    SELECT 'cap', 'step', toNullable(step_key), toNullable(cap_ms), declared_at,
           CAST(NULL, 'Nullable(Int64)'), CAST(NULL, 'Nullable(Int64)'),
           CAST(NULL, 'Nullable(Int64)')
    FROM budgetscope_declared_step_caps)
ORDER BY what, scope = 'agent', target
