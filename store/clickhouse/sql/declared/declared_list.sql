-- name: declared_list
-- Every declared budget and cap, the default first (as store/declared/sql/declared_list.sql).
SELECT what, scope, target, duration_ms,
       formatDateTime(declared_at, '%Y-%m-%dT%H:%i:%SZ', 'UTC') AS declared_at FROM (
    SELECT 'budget' AS what, scope, nullIf(agent, '') AS target, budget_ms AS duration_ms,
           declared_at
    FROM budgetscope_declared_budgets
    UNION ALL
    SELECT 'cap', 'step', toNullable(step_key), cap_ms, declared_at
    FROM budgetscope_declared_step_caps)
ORDER BY what, scope = 'agent', target
