-- name: run_summary
-- Everything the runs table knows about one run, looked up by run id; ClickHouse dialect of sql/run_summary.sql.
SELECT * FROM budgetscope_runs WHERE run_id = {run_id:String};
