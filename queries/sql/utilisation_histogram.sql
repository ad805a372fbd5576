-- name: utilisation_histogram
-- Runs per agent per utilisation bin of width $bin_width (bin_start inclusive), behind the percentiles.
SELECT agent,
       floor(utilisation / $bin_width::DOUBLE) * $bin_width::DOUBLE AS bin_start,
       floor(utilisation / $bin_width::DOUBLE) * $bin_width::DOUBLE + $bin_width::DOUBLE
           AS bin_end,
       count(*) AS runs
FROM runs
WHERE budget_ms IS NOT NULL AND utilisation IS NOT NULL
  AND /*@run_filter(start_ns)*/
GROUP BY ALL
ORDER BY agent NULLS LAST, bin_start;
