-- name: utilisation_report
-- Run utilisation percentiles per agent over the runs with a known budget (docs/metrics.md §5).
SELECT agent,
       count(*) AS runs,
       quantile_cont(utilisation, 0.50) AS p50,
       quantile_cont(utilisation, 0.90) AS p90,
       quantile_cont(utilisation, 0.95) AS p95,
       quantile_cont(utilisation, 0.99) AS p99,
       max(utilisation) AS max
FROM runs
WHERE budget_ms IS NOT NULL AND utilisation IS NOT NULL
  AND /*@run_filter(start_ns)*/
GROUP BY agent
ORDER BY agent NULLS LAST;
