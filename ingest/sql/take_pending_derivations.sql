-- name: take_pending_derivations
-- The next slice of traces to derive (parameter: how many), oldest marks first, as the temp
-- table the derivation reads.
CREATE OR REPLACE TEMP TABLE touched_traces AS
SELECT trace_id, since
FROM pending_derivations
ORDER BY since, trace_id
LIMIT ?
