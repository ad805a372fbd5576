-- name: measure_in_full
-- A slice of traces to measure again failed on what it holds: mark them for the full
-- derivation instead, which derives each from its spans and confines a failing trace.
INSERT INTO pending_derivations SELECT trace_id, since FROM touched_traces;
DELETE FROM pending_measurements WHERE trace_id IN (SELECT trace_id FROM touched_traces)
