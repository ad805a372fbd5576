-- name: reconciliation_by_period
-- Write steps per ISO week (UTC, of the run start) and step key: reconciliation rate and orphans (SPEC §6); ClickHouse dialect of sql/reconciliation_by_period.sql.
SELECT concat(toString(toISOYear(toDateTime(intDiv(run_start_ns, 1000000000), 'UTC'))), '-W',
              leftPad(toString(toISOWeek(toDateTime(intDiv(run_start_ns, 1000000000), 'UTC'))), 2, '0')) AS week,
       step_key,
       count() AS write_steps,
       countIf(reconciled) AS reconciled_writes,
       countIf(orphan) AS orphan_writes,
       countIf(reconciled) / count() AS reconciliation_rate
FROM budgetscope_write_steps
WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
GROUP BY week, step_key
ORDER BY week, step_key;
