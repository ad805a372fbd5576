-- name: declared_budget_unset
-- Remove a declared budget ($scope 'agent' with the agent's name, or 'default' with agent '').
DELETE FROM declared_budgets WHERE scope = $scope AND agent = $agent
