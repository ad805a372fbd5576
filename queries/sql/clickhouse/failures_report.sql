-- name: failures_report
-- Steps per step key split by SPEC §3 class, over every step of the runs in the filter; ClickHouse dialect of sql/failures_report.sql.
SELECT step_key,
       count() AS steps,
       countIf(class = 'ok') AS ok,
       countIf(class = 'client_timeout') AS client_timeouts,
       countIf(class = 'upstream_error') AS upstream_errors,
       countIf(class = 'refused') AS refused,
       countIf(class = 'cancelled') AS cancelled,
       countIf(class = 'client_error') AS client_errors,
       countIf(class = 'error') AS errors
FROM budgetscope_steps
WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
GROUP BY step_key
ORDER BY steps DESC, step_key;
