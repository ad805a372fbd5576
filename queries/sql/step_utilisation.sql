-- name: step_utilisation
-- Step duration against budget.allocated_ms per step key, steps with an allocation only (SPEC §5).
SELECT step_key,
       count(*) AS steps,
       quantile_cont(utilisation, 0.50) AS p50,
       quantile_cont(utilisation, 0.90) AS p90,
       quantile_cont(utilisation, 0.95) AS p95,
       quantile_cont(utilisation, 0.99) AS p99,
       max(utilisation) AS max,
       avg(allocated_ms) AS mean_allocated_ms,
       avg(duration_ms) AS mean_duration_ms
FROM steps
WHERE utilisation IS NOT NULL
  AND /*@run_filter(run_start_ns)*/
GROUP BY step_key
ORDER BY step_key;
