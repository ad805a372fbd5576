-- name: reconciliation_by_period
-- Write steps per UTC day (and its ISO week) of the run start and step key: reconciliation rate and orphans (docs/metrics.md §6); ClickHouse dialect of sql/reconciliation_by_period.sql.
-- budgetscope_write_steps is a table here (derive_build.sql), built with each write's
-- reconciled and orphan flags, so reading it is the cheap plan; the DuckDB file asks the
-- same question of the steps and links instead, its write_steps being a view that ranks every
-- reconciliation in the database on each read. Same rule, same groups, same counts.
SELECT printf('%d-W%02d',
              toISOYear(fromUnixTimestamp64Micro(intDiv(run_start_ns, 1000), 'UTC')),
              toISOWeek(fromUnixTimestamp64Micro(intDiv(run_start_ns, 1000), 'UTC'))) AS week,
       formatDateTime(fromUnixTimestamp64Micro(intDiv(run_start_ns, 1000), 'UTC'), '%Y-%m-%d')
           AS day,
       step_key,
       COUNT(*) AS write_steps,
       COUNT(*) FILTER (WHERE reconciled) AS reconciled_writes,
       COUNT(*) FILTER (WHERE orphan) AS orphan_writes,
       COUNT(*) FILTER (WHERE reconciled) / COUNT(*) AS reconciliation_rate
FROM budgetscope_write_steps AS write_steps
WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
GROUP BY ALL
ORDER BY week, day, step_key
