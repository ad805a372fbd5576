-- name: tool_latency
-- Every tool call's duration beside its cap (one row per call, refused ones aside); ClickHouse dialect of sql/tool_latency.sql.
SELECT step_key, duration_ms, cap_ms, class
FROM budgetscope_steps
WHERE kind = 'tool' AND class != 'refused'
  AND ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
ORDER BY step_key, duration_ms;
