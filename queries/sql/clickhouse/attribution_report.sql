-- name: attribution_report
-- Per step key over the exhausted runs in the filter: budget share, culprit and holder counts (SPEC §4); ClickHouse dialect of sql/attribution_report.sql.
WITH exhausted AS (
    SELECT run_id, budget_ms, culprit_key, holder_key
    FROM budgetscope_runs
    WHERE exhausted
      AND ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
), total AS (
    SELECT sum(budget_ms) AS budget_ms FROM exhausted
), consumed AS (
    SELECT step_key, sum(consumption_ms) AS consumption_ms, uniqExact(run_id) AS runs
    FROM budgetscope_steps
    WHERE is_top_level AND run_exhausted
      AND ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
    GROUP BY step_key
), culprits AS (
    SELECT culprit_key AS step_key, count() AS runs FROM exhausted GROUP BY culprit_key
), holders AS (
    SELECT holder_key AS step_key, count() AS runs FROM exhausted GROUP BY holder_key
)
SELECT c.step_key AS step_key,
       c.consumption_ms / total.budget_ms AS budget_share,
       coalesce(cu.runs, 0) AS culprit_runs,
       coalesce(h.runs, 0) AS holder_runs,
       c.runs AS exhausted_runs
FROM consumed c
CROSS JOIN total
LEFT JOIN culprits cu ON cu.step_key = c.step_key
LEFT JOIN holders h ON h.step_key = c.step_key
ORDER BY budget_share DESC, culprit_runs DESC, step_key;
