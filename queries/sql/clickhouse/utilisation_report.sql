-- name: utilisation_report
-- Run utilisation percentiles per agent over the runs with a known budget (SPEC §5); ClickHouse dialect of sql/utilisation_report.sql.
-- quantileExactInclusive interpolates linearly between the two nearest ranks, as DuckDB's
-- quantile_cont and numpy's default do.
SELECT agent,
       count() AS runs,
       quantileExactInclusive(0.50)(utilisation) AS p50,
       quantileExactInclusive(0.90)(utilisation) AS p90,
       quantileExactInclusive(0.95)(utilisation) AS p95,
       quantileExactInclusive(0.99)(utilisation) AS p99,
       max(utilisation) AS max
FROM budgetscope_runs
WHERE budget_ms IS NOT NULL AND utilisation IS NOT NULL
  AND ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
GROUP BY agent
ORDER BY agent NULLS LAST;
