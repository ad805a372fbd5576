-- name: isolate_pending_derivations
-- A part of a slice whose derivation failed, as the temp table the derivation reads
-- (parameters: the traces' ids, and their earliest marks, in the same order), so that the
-- traces that derive are derived and the one that fails is found (store/derive/pending.py).
CREATE OR REPLACE TEMP TABLE touched_traces AS
SELECT unnest(?::VARCHAR[]) AS trace_id, unnest(?::TIMESTAMPTZ[]) AS since
