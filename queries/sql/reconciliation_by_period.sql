-- name: reconciliation_by_period
-- Write steps per ISO week (UTC, of the run start) and step key: reconciliation rate and orphans (SPEC §6).
SELECT printf('%d-W%02d', isoyear(make_timestamp(run_start_ns // 1000)),
              week(make_timestamp(run_start_ns // 1000))) AS week,
       step_key,
       count(*) AS write_steps,
       count(*) FILTER (WHERE reconciled) AS reconciled_writes,
       count(*) FILTER (WHERE orphan) AS orphan_writes,
       count(*) FILTER (WHERE reconciled) / count(*) AS reconciliation_rate
FROM write_steps
WHERE /*@run_filter(run_start_ns)*/
GROUP BY ALL
ORDER BY week, step_key;
