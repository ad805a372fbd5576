-- name: orphan_writes
-- The orphan writes (docs/metrics.md §6: uncertain, never read back) with their run, tool, idempotency key and time.
SELECT run_id, step_key, idempotency_key,
       strftime(make_timestamp(start_ns // 1000), '%Y-%m-%dT%H:%M:%S.%gZ') AS start,
       agent, class, effect_status
FROM write_steps
WHERE orphan
  AND /*@run_filter(run_start_ns)*/
ORDER BY start_ns DESC, run_id, step_key;
