-- name: declared_affected_by_cap
-- The traces holding steps of $step_key without their own budget.allocated_ms, whose
-- allocations a change of that key's declared cap changes (docs/guide.md#declaring-budgets), as the
-- temp table declared_affected(trace_id, runs). A step's own allocation is read from its span: the
-- steps table does not say where an allocation came from, and re-deriving the traces whose steps
-- all carry their own would change nothing at a cost (17,213 traces, ~20 s at 1M spans).
CREATE OR REPLACE TEMP TABLE declared_affected AS
SELECT st.trace_id, count(DISTINCT st.run_id) AS runs
FROM steps st
JOIN spans sp ON sp.trace_id = st.trace_id AND sp.span_id = st.span_id
WHERE st.step_key = $step_key
  AND sp.budget_allocated_ms IS NULL
GROUP BY st.trace_id
