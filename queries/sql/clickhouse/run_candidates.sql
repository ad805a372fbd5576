-- name: run_candidates
-- Run ids stored for a trace id, to suggest when a run id was not found; ClickHouse dialect of sql/run_candidates.sql.
SELECT run_id FROM budgetscope_runs WHERE trace_id = {trace_id:String}
ORDER BY start_ns, run_id LIMIT 10;
