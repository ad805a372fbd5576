-- name: take_pending_derivations
-- The next slice of traces to derive (parameter: how many), oldest marks first, as the temp
-- table the derivation reads: a trace marked by several writes once, from its earliest mark.
CREATE OR REPLACE TEMP TABLE touched_traces AS
SELECT trace_id, min(since) AS since
FROM pending_derivations
GROUP BY trace_id
ORDER BY since, trace_id
LIMIT ?
