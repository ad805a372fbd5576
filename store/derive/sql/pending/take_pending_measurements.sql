-- name: take_pending_measurements
-- The next slice of traces to measure again (parameter: how many), as the temp table the
-- derivation reads (since: the trace's first arrival, for a full derivation of it). A trace
-- also marked in pending_derivations is left for the full derivation, which clears both marks.
CREATE OR REPLACE TEMP TABLE touched_traces AS
SELECT m.trace_id,
       coalesce(min(a.first_received_at), TIMESTAMPTZ '1970-01-01 00:00:00+00') AS since
FROM (SELECT DISTINCT trace_id FROM pending_measurements
      WHERE trace_id NOT IN (SELECT trace_id FROM pending_derivations)) m
LEFT JOIN trace_arrivals a ON a.trace_id = m.trace_id
GROUP BY m.trace_id
ORDER BY m.trace_id
LIMIT ?
