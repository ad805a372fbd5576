-- name: failures_daily
-- Steps per UTC day of their run's start, one count column per docs/metrics.md §3 class (never one "errors").
SELECT strftime(make_timestamp(run_start_ns // 1000), '%Y-%m-%d') AS day,
       count(*) AS steps,
       count(*) FILTER (WHERE class = 'ok') AS ok,
       count(*) FILTER (WHERE class = 'client_timeout') AS client_timeout,
       count(*) FILTER (WHERE class = 'upstream_error') AS upstream_error,
       count(*) FILTER (WHERE class = 'refused') AS refused,
       count(*) FILTER (WHERE class = 'cancelled') AS cancelled,
       count(*) FILTER (WHERE class = 'client_error') AS client_error,
       count(*) FILTER (WHERE class = 'error') AS error
FROM steps
WHERE /*@run_filter(run_start_ns)*/
GROUP BY day
ORDER BY day;
