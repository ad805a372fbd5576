-- name: run_candidates
-- Run ids stored for a trace id, to suggest when a run id was not found.
SELECT run_id FROM runs WHERE trace_id = $trace_id ORDER BY start_ns, run_id LIMIT 10;
