-- name: declared_list
-- Every declared budget (with each of its dimensions) and cap, the default first, then agents and step keys by name.
SELECT 'budget' AS what, scope, nullif(agent, '') AS target, budget_ms AS duration_ms,
       declared_at, tokens, usd_nano, usd_per_week_nano
FROM declared_budgets
UNION ALL
SELECT 'cap', 'step', step_key, cap_ms, declared_at, NULL, NULL, NULL FROM declared_step_caps
ORDER BY what, scope = 'agent', target
