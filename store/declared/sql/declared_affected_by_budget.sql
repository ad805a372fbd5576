-- name: declared_affected_by_budget
-- The traces whose runs a change of the declared budget ($scope, $agent) re-measures, as the
-- temp table declared_affected(trace_id, runs) (SPEC §10). A run with its own budget.total_ms
-- never is; an agent's declaration concerns that agent's other runs; the default concerns the
-- other runs of every agent without a declaration of its own (and of runs without an agent).
-- Run after the change itself, so that "without a declaration" is read as it now stands.
CREATE OR REPLACE TEMP TABLE declared_affected AS
SELECT trace_id, count(*) AS runs
FROM runs
WHERE budget_source IS DISTINCT FROM 'span'
  AND CASE WHEN $scope = 'agent' THEN agent IS NOT DISTINCT FROM $agent
           ELSE agent IS NULL OR agent NOT IN (
               SELECT agent FROM declared_budgets WHERE scope = 'agent') END
GROUP BY trace_id
