-- name: attribution_completed
-- Budget share per step key over the budgeted runs that were NOT exhausted; ClickHouse dialect of sql/attribution_completed.sql.
WITH survived AS (
    SELECT run_id, budget_ms
    FROM budgetscope_runs
    WHERE budget_ms IS NOT NULL AND NOT exhausted
      AND ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
), total AS (
    SELECT sum(budget_ms) AS budget_ms, count() AS runs FROM survived
)
SELECT st.step_key AS step_key,
       sum(st.consumption_ms) / any(total.budget_ms) AS budget_share,
       uniqExact(st.run_id) AS runs
FROM budgetscope_steps st
JOIN survived ON survived.run_id = st.run_id
CROSS JOIN total
WHERE st.is_top_level
GROUP BY st.step_key
ORDER BY budget_share DESC, step_key;
