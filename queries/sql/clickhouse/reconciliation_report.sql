-- name: reconciliation_report
-- Write steps per step key: uncertain, reconciled, orphaned, and what the read-backs found (SPEC §6); ClickHouse dialect of sql/reconciliation_report.sql.
SELECT step_key,
       count() AS write_steps,
       countIf(is_uncertain) AS uncertain_writes,
       countIf(reconciled) AS reconciled_writes,
       countIf(orphan) AS orphan_writes,
       countIf(reconciled) / count() AS reconciliation_rate,
       countIf(last_result = 'landed') AS landed,
       countIf(last_result = 'not_landed') AS not_landed,
       countIf(reconciled AND last_result NOT IN ('landed', 'not_landed')) AS unknown
FROM budgetscope_write_steps
WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
GROUP BY step_key
ORDER BY write_steps DESC, step_key;
