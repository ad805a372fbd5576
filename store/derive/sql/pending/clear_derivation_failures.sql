-- name: clear_derivation_failures
-- The traces in touched_traces derived: a failure recorded for one of them before (its
-- spans since changed, or the derivation was fixed) is over.
DELETE FROM derivation_failures
WHERE trace_id IN (SELECT trace_id FROM touched_traces)
