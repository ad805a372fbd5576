-- name: step_utilisation
-- Step duration against budget.allocated_ms per step key, steps with an allocation only (docs/metrics.md §5).
-- Backoff sleeps are one row, `backoff:*`: each lasts its whole allocation by design (~100%),
-- and one row per retried step key (13 in the sample) pushed the tools off the chart.
SELECT key AS step_key,
       count(*) AS steps,
       quantile_cont(utilisation, 0.50) AS p50,
       quantile_cont(utilisation, 0.90) AS p90,
       quantile_cont(utilisation, 0.95) AS p95,
       quantile_cont(utilisation, 0.99) AS p99,
       max(utilisation) AS max,
       avg(allocated_ms) AS mean_allocated_ms,
       avg(duration_ms) AS mean_duration_ms
FROM (
    SELECT CASE WHEN kind = 'backoff' THEN 'backoff:*' ELSE step_key END AS key,
           utilisation, allocated_ms, duration_ms
    FROM steps
    WHERE utilisation IS NOT NULL
      AND /*@run_filter(run_start_ns)*/
)
GROUP BY key
ORDER BY key;
