-- name: utilisation_histogram
-- Runs per agent per utilisation bin of width bin_width (bin_start inclusive); ClickHouse dialect of sql/utilisation_histogram.sql.
SELECT agent,
       floor(utilisation / {bin_width:Float64}) * {bin_width:Float64} AS bin_start,
       floor(utilisation / {bin_width:Float64}) * {bin_width:Float64} + {bin_width:Float64}
           AS bin_end,
       count() AS runs
FROM budgetscope_runs
WHERE budget_ms IS NOT NULL AND utilisation IS NOT NULL
  AND ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
GROUP BY agent, bin_start, bin_end
ORDER BY agent NULLS LAST, bin_start;
