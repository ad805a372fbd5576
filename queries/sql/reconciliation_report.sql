-- name: reconciliation_report
-- Write steps per step key: uncertain, reconciled, orphaned, and what the read-backs found (docs/metrics.md §6).
-- landed / not_landed / unknown count reconciled writes by the result of their latest
-- reconciliation, so landed + not_landed + unknown = reconciled_writes.
SELECT step_key,
       count(*) AS write_steps,
       count(*) FILTER (WHERE is_uncertain) AS uncertain_writes,
       count(*) FILTER (WHERE reconciled) AS reconciled_writes,
       count(*) FILTER (WHERE orphan) AS orphan_writes,
       count(*) FILTER (WHERE reconciled) / count(*) AS reconciliation_rate,
       count(*) FILTER (WHERE last_result = 'landed') AS landed,
       count(*) FILTER (WHERE last_result = 'not_landed') AS not_landed,
       count(*) FILTER (WHERE reconciled AND last_result NOT IN ('landed', 'not_landed'))
           AS unknown
FROM write_steps
WHERE /*@run_filter(run_start_ns)*/
GROUP BY step_key
ORDER BY write_steps DESC, step_key;
