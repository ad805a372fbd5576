-- name: runs_report
-- One row per run started in [since, until) for the agent filter (SPEC §8 `runs`); ClickHouse dialect of sql/runs_report.sql.
SELECT run_id,
       agent,
       concat(formatDateTime(toDateTime(intDiv(start_ns, 1000000000), 'UTC'), '%Y-%m-%dT%H:%i:%S'),
              '.', leftPad(toString(intDiv(start_ns, 1000000) % 1000), 3, '0'), 'Z') AS start,
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
       budget_source
FROM budgetscope_runs
WHERE ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
ORDER BY start_ns, run_id;
