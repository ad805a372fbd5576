-- name: 4_to_5
-- Schema 4 to 5: step_lifts (the tools lifted out of model steps) and pending_measurements
-- (traces to measure again after a change of a declared budget) are new tables, made by the
-- DDL. step_lifts is filled by the derivation, so every trace not already waiting is derived
-- again, from its first span on: until then a declared budget's change would measure a run
-- with lifted tools without them.
INSERT INTO pending_derivations
SELECT trace_id, min(received_at) FROM spans
WHERE trace_id NOT IN (SELECT trace_id FROM pending_derivations)
GROUP BY trace_id;
