-- name: declared_affected_by_budget
-- The traces whose runs a change of the declared budget ($scope, $agent) re-measures in the dimensions that changed ($time, $tokens, $usd), as the temp table declared_affected(trace_id, runs) (docs/metrics.md §10).
-- A run with its own budget in a dimension (budget.total_ms, budget.total_tokens,
-- budget.total_usd) never is in that one; an agent's declaration concerns that agent's other
-- runs; the default concerns the other runs of every agent without a declaration of its own
-- in that dimension (and of runs without an agent). Run after the change itself, so that
-- "without a declaration" is read as it now stands.
CREATE OR REPLACE TEMP TABLE declared_affected AS
SELECT trace_id, count(*) AS runs
FROM runs
WHERE ($time AND budget_source IS DISTINCT FROM 'span'
       AND CASE WHEN $scope = 'agent' THEN agent IS NOT DISTINCT FROM $agent
                ELSE agent IS NULL OR agent NOT IN (
                    SELECT agent FROM declared_budgets
                    WHERE scope = 'agent' AND budget_ms IS NOT NULL) END)
   OR ($tokens AND token_budget_source IS DISTINCT FROM 'span'
       AND CASE WHEN $scope = 'agent' THEN agent IS NOT DISTINCT FROM $agent
                ELSE agent IS NULL OR agent NOT IN (
                    SELECT agent FROM declared_budgets
                    WHERE scope = 'agent' AND tokens IS NOT NULL) END)
   OR ($usd AND usd_budget_source IS DISTINCT FROM 'span'
       AND CASE WHEN $scope = 'agent' THEN agent IS NOT DISTINCT FROM $agent
                ELSE agent IS NULL OR agent NOT IN (
                    SELECT agent FROM declared_budgets
                    WHERE scope = 'agent' AND usd_nano IS NOT NULL) END)
GROUP BY trace_id
