-- name: orphan_writes
-- The orphan writes (SPEC §6: uncertain, never read back) with their run, tool, idempotency key and time; ClickHouse dialect of sql/orphan_writes.sql.
SELECT run_id, step_key, idempotency_key,
       concat(formatDateTime(toDateTime(intDiv(start_ns, 1000000000), 'UTC'), '%Y-%m-%dT%H:%i:%S'),
              '.', leftPad(toString(intDiv(start_ns, 1000000) % 1000), 3, '0'), 'Z') AS start,
       agent, class, effect_status
FROM budgetscope_write_steps
WHERE orphan
  AND ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
ORDER BY start_ns DESC, run_id, step_key;
