-- name: orphan_writes
-- The orphan writes (SPEC §6: uncertain, never read back) with their run, tool, idempotency key and time.
SELECT run_id, step_key, idempotency_key,
       strftime(make_timestamp(start_ns // 1000), '%Y-%m-%dT%H:%M:%S.%gZ') AS start,
       agent, class, effect_status
FROM write_steps
WHERE orphan
  AND ($since_ns::BIGINT IS NULL OR run_start_ns >= $since_ns::BIGINT)
  AND ($until_ns::BIGINT IS NULL OR run_start_ns < $until_ns::BIGINT)
  AND ($agent::VARCHAR IS NULL OR agent = $agent::VARCHAR)
ORDER BY start_ns DESC, run_id, step_key;
