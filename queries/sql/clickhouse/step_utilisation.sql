-- name: step_utilisation
-- Step duration against budget.allocated_ms per step key, steps with an allocation only (SPEC §5); ClickHouse dialect of sql/step_utilisation.sql.
SELECT step_key,
       count() AS steps,
       quantileExactInclusive(0.50)(utilisation) AS p50,
       quantileExactInclusive(0.90)(utilisation) AS p90,
       quantileExactInclusive(0.95)(utilisation) AS p95,
       quantileExactInclusive(0.99)(utilisation) AS p99,
       max(utilisation) AS max,
       avg(allocated_ms) AS mean_allocated_ms,
       avg(duration_ms) AS mean_duration_ms
FROM budgetscope_steps
WHERE utilisation IS NOT NULL
  AND ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
GROUP BY step_key
ORDER BY step_key;
