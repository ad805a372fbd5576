-- name: clear_pending_derivations
-- The slice in touched_traces is derived: unmark it (same transaction as the derived rows).
DELETE FROM pending_derivations
WHERE trace_id IN (SELECT trace_id FROM touched_traces)
