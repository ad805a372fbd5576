-- name: declared_affected_by_cap
-- The traces holding steps of $step_key, whose allocations a change of that key's declared cap
-- changes (SPEC §10), as the temp table declared_affected(trace_id, runs). Steps that carry
-- their own budget.allocated_ms are re-derived too, unchanged: the steps table does not say
-- where an allocation came from, and deriving a trace again is harmless.
CREATE OR REPLACE TEMP TABLE declared_affected AS
SELECT trace_id, count(DISTINCT run_id) AS runs
FROM steps
WHERE step_key = $step_key
GROUP BY trace_id
