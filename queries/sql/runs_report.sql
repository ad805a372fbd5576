-- name: runs_report
-- One row per run started in [since, until) for the agent filter (docs/metrics.md §8 `runs`).
-- culprit_step and holder_step number the culprit and the holder among the run's top-level
-- steps by start (docs/metrics.md §4), so that two calls with one step key are told apart.
-- tokens, cost_usd (integer nano-dollars here, exact dollars in queries/reports.py) and
-- cost_complete close the row (docs/metrics.md §8, §11.4): every earlier column keeps its place.
SELECT run_id,
       agent,
       strftime(make_timestamp(start_ns // 1000), '%Y-%m-%dT%H:%M:%S.%gZ') AS start,
       budget_ms,
       elapsed_ms,
       utilisation,
       outcome,
       exhausted,
       culprit_key AS culprit,
       culprit_share,
       holder_key AS holder,
       unattributed_ms,
       overrun_ms,
       budget_source,
       culprit_step,
       holder_step,
       root_missing,
       tokens,
       cost_nano AS cost_usd,
       cost_complete
FROM runs
WHERE /*@run_filter(start_ns)*/
ORDER BY start_ns, run_id;
