-- name: declared_budget_set
-- Declare (or change) a budget: $scope 'agent' with the agent's name, or 'default' with agent ''.
INSERT INTO declared_budgets VALUES ($scope, $agent, $budget_ms, now())
ON CONFLICT (scope, agent) DO UPDATE SET budget_ms = excluded.budget_ms,
                                         declared_at = excluded.declared_at
