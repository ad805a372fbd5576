-- name: clear_pending_derivations
-- The slice in touched_traces is derived: remove its marks (same transaction as the derived
-- rows). Only the marks this transaction's snapshot saw go: a mark the writer committed since
-- (new spans of a trace in the slice, which this derivation did not read) stays for next turn.
DELETE FROM pending_derivations
WHERE trace_id IN (SELECT trace_id FROM touched_traces);
-- A trace derived in full is measured too: its marks for measuring again go with it.
DELETE FROM pending_measurements
WHERE trace_id IN (SELECT trace_id FROM touched_traces)
