-- name: declared_budget_unset
-- Remove dimensions of a declared budget ($scope 'agent' with the agent's name, or 'default' with agent ''; $unset_time and the others say which), and the declaration once it has none left.
UPDATE declared_budgets SET
    budget_ms = CASE WHEN $unset_time THEN NULL ELSE budget_ms END,
    tokens = CASE WHEN $unset_tokens THEN NULL ELSE tokens END,
    usd_nano = CASE WHEN $unset_usd THEN NULL ELSE usd_nano END,
    usd_per_week_nano = CASE WHEN $unset_usd_per_week THEN NULL ELSE usd_per_week_nano END
WHERE scope = $scope AND agent = $agent;
DELETE FROM declared_budgets
WHERE scope = $scope AND agent = $agent AND budget_ms IS NULL AND tokens IS NULL
  AND usd_nano IS NULL AND usd_per_week_nano IS NULL
