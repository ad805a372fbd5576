-- name: run_summary
-- Everything the runs table knows about one run, looked up by run id.
SELECT * FROM runs WHERE run_id = $run_id;
