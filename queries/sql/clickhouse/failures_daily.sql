-- name: failures_daily
-- Steps per UTC day of their run's start, one count column per SPEC §3 class; ClickHouse dialect of sql/failures_daily.sql.
SELECT formatDateTime(toDateTime(intDiv(run_start_ns, 1000000000), 'UTC'), '%Y-%m-%d') AS day,
       count() AS steps,
       countIf(class = 'ok') AS ok,
       countIf(class = 'client_timeout') AS client_timeout,
       countIf(class = 'upstream_error') AS upstream_error,
       countIf(class = 'refused') AS refused,
       countIf(class = 'cancelled') AS cancelled,
       countIf(class = 'client_error') AS client_error,
       countIf(class = 'error') AS error
FROM budgetscope_steps
WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
GROUP BY day
ORDER BY day;
