-- name: declared_budget_set
-- Declare (or change) a budget: $scope 'agent' with the agent's name, or 'default' with agent ''; the dimensions given (not NULL) are set, the others kept.
INSERT INTO declared_budgets (scope, agent, budget_ms, declared_at, tokens, usd_nano,
                              usd_per_week_nano)
VALUES ($scope, $agent, $budget_ms, now(), $tokens, $usd_nano, $usd_per_week_nano)
ON CONFLICT (scope, agent) DO UPDATE SET
    budget_ms = coalesce(excluded.budget_ms, budget_ms),
    tokens = coalesce(excluded.tokens, tokens),
    usd_nano = coalesce(excluded.usd_nano, usd_nano),
    usd_per_week_nano = coalesce(excluded.usd_per_week_nano, usd_per_week_nano),
    declared_at = excluded.declared_at
