-- name: simulation_runs
-- Runs started in [since, until) for the agent filter as the timeout-policy replay reads them, numbered 0..n-1 by run_id; ClickHouse dialect of sql/simulation_runs.sql.
SELECT toInt64(row_number() OVER (ORDER BY run_id) - 1) AS run_index,
       run_id,
       agent,
       start_ns,
       end_ns,
       budget_ms,
       deadline_ns - start_ns AS deadline_offset_ns,
       coalesce(reserve_ms, 0) AS reserve_ms,
       utilisation,
       exhausted
FROM budgetscope_runs
WHERE ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
ORDER BY run_index;
