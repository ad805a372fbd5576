-- name: attribution_completed
-- Budget share per step key over the budgeted runs that were NOT exhausted, as attribution_report does for exhausted ones.
-- Side by side with attribution_report, the keys whose share grows when runs die stand out.
WITH survived AS (
    SELECT run_id, budget_ms
    FROM runs
    WHERE budget_ms IS NOT NULL AND NOT exhausted
      AND /*@run_filter(start_ns)*/
), total AS (
    SELECT sum(budget_ms) AS budget_ms, count(*) AS runs FROM survived
)
SELECT st.step_key,
       sum(st.consumption_ms) / any_value(total.budget_ms) AS budget_share,
       count(DISTINCT st.run_id) AS runs
FROM steps st
JOIN survived USING (run_id)
CROSS JOIN total
WHERE st.is_top_level
GROUP BY st.step_key
ORDER BY budget_share DESC, st.step_key;
