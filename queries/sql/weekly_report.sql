-- name: weekly_report
-- One row per ISO week (UTC, Monday start, of the run start) × agent: the SPEC §7 columns.
-- Budget metrics (exhausted_runs, exhaustion_rate, utilisation_*) cover the runs with a known
-- budget; `runs`, `steps` and the failure and write counts cover every run.
-- top_culprit is the week's first attribution row: the step key with the largest budget share
-- over the exhausted runs (ties: more culprit runs, then the key); top_culprit_share its share.
WITH r AS (
    SELECT * FROM runs
    WHERE ($since_ns::BIGINT IS NULL OR start_ns >= $since_ns::BIGINT)
      AND ($until_ns::BIGINT IS NULL OR start_ns < $until_ns::BIGINT)
      AND ($agent::VARCHAR IS NULL OR agent = $agent::VARCHAR)
), run_week AS (
    SELECT week, agent,
           count(*) AS runs,
           count(*) FILTER (WHERE exhausted) AS exhausted_runs,
           count(*) FILTER (WHERE exhausted)
               / nullif(count(*) FILTER (WHERE budget_ms IS NOT NULL), 0) AS exhaustion_rate,
           quantile_cont(utilisation, 0.50) AS utilisation_p50,
           quantile_cont(utilisation, 0.90) AS utilisation_p90,
           quantile_cont(utilisation, 0.99) AS utilisation_p99,
           sum(budget_ms) FILTER (WHERE exhausted) AS exhausted_budget_ms
    FROM r GROUP BY ALL
), s AS (
    SELECT st.*, r.week FROM steps st JOIN r USING (run_id)
), step_week AS (
    SELECT week, agent,
           count(*) AS steps,
           count(*) FILTER (WHERE class = 'client_timeout') AS client_timeouts,
           count(*) FILTER (WHERE class = 'upstream_error') AS upstream_errors,
           count(*) FILTER (WHERE class = 'refused') AS refused
    FROM s GROUP BY ALL
), write_week AS (
    SELECT r.week, r.agent,
           count(*) AS write_steps,
           count(*) FILTER (WHERE w.reconciled) AS reconciled_writes,
           count(*) FILTER (WHERE w.orphan) AS orphan_writes
    FROM write_steps w JOIN r USING (run_id) GROUP BY ALL
), key_week AS (
    SELECT s.week, s.agent, s.step_key, sum(s.consumption_ms) AS consumption_ms,
           count(*) FILTER (WHERE r.culprit_span_id = s.span_id) AS culprit_runs
    FROM s JOIN r USING (run_id)
    WHERE s.is_top_level AND s.run_exhausted
    GROUP BY ALL
), top AS (
    SELECT week, agent, step_key AS top_culprit, consumption_ms
    FROM key_week
    QUALIFY row_number() OVER (PARTITION BY week, agent
                               ORDER BY consumption_ms DESC, culprit_runs DESC, step_key) = 1
)
SELECT rw.week,
       rw.agent,
       rw.runs,
       rw.exhausted_runs,
       rw.exhaustion_rate,
       rw.utilisation_p50,
       rw.utilisation_p90,
       rw.utilisation_p99,
       coalesce(sw.steps, 0) AS steps,
       coalesce(sw.client_timeouts, 0) AS client_timeouts,
       coalesce(sw.upstream_errors, 0) AS upstream_errors,
       coalesce(sw.refused, 0) AS refused,
       coalesce(ww.write_steps, 0) AS write_steps,
       coalesce(ww.reconciled_writes, 0) AS reconciled_writes,
       ww.reconciled_writes / nullif(ww.write_steps, 0) AS reconciliation_rate,
       coalesce(ww.orphan_writes, 0) AS orphan_writes,
       t.top_culprit,
       t.consumption_ms / rw.exhausted_budget_ms AS top_culprit_share
FROM run_week rw
LEFT JOIN step_week sw ON sw.week = rw.week AND sw.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN write_week ww ON ww.week = rw.week AND ww.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN top t ON t.week = rw.week AND t.agent IS NOT DISTINCT FROM rw.agent
ORDER BY rw.week, rw.agent NULLS LAST;
