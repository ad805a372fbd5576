-- name: runs_with_steps
-- Run ids of the runs in the filter holding a step of step key and/or class; ClickHouse dialect of sql/runs_with_steps.sql.
SELECT DISTINCT run_id
FROM budgetscope_steps
WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
  AND ({step_key:Nullable(String)} IS NULL OR step_key = {step_key:Nullable(String)})
  AND ({step_class:Nullable(String)} IS NULL OR class = {step_class:Nullable(String)})
ORDER BY run_id;
