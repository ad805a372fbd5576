-- name: failures_report
-- Steps per step key split by docs/metrics.md §3 class, over every step (nested ones too) of the runs in the filter.
-- Client give-ups and upstream failures stay separate columns: never one "errors" bar.
SELECT step_key,
       count(*) AS steps,
       count(*) FILTER (WHERE class = 'ok') AS ok,
       count(*) FILTER (WHERE class = 'client_timeout') AS client_timeouts,
       count(*) FILTER (WHERE class = 'upstream_error') AS upstream_errors,
       count(*) FILTER (WHERE class = 'refused') AS refused,
       count(*) FILTER (WHERE class = 'cancelled') AS cancelled,
       count(*) FILTER (WHERE class = 'client_error') AS client_errors,
       count(*) FILTER (WHERE class = 'error') AS errors
FROM steps
WHERE /*@run_filter(run_start_ns)*/
GROUP BY step_key
ORDER BY steps DESC, step_key;
