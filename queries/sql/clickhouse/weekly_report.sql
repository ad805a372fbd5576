-- name: weekly_report
-- One row per ISO week (UTC, Monday start, of the run start) × agent: the SPEC §7 columns; ClickHouse dialect of sql/weekly_report.sql.
-- Steps carry their run's week here (budgetscope_steps.week, set by derive_build.sql), so they
-- are grouped by week directly; the DuckDB file sums them per run start first and joins the
-- weeks. Same groups, same sums.
WITH r AS (
    SELECT * FROM budgetscope_runs
    WHERE ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
), run_week AS (
    SELECT week, agent,
           min(start_ns) AS first_start_ns,
           count() AS runs,
           countIf(budget_ms IS NOT NULL) AS budgeted_runs,
           countIf(exhausted) AS exhausted_runs,
           countIf(exhausted) / nullIf(countIf(budget_ms IS NOT NULL), 0) AS exhaustion_rate,
           quantileExactInclusive(0.50)(utilisation) AS utilisation_p50,
           quantileExactInclusive(0.90)(utilisation) AS utilisation_p90,
           quantileExactInclusive(0.99)(utilisation) AS utilisation_p99,
           sumIfOrNull(budget_ms, exhausted) AS exhausted_budget_ms
    FROM r GROUP BY week, agent
), step_week AS (
    SELECT week, agent,
           count() AS steps,
           countIf(class = 'client_timeout') AS client_timeouts,
           countIf(class = 'upstream_error') AS upstream_errors,
           countIf(class = 'refused') AS refused
    FROM budgetscope_steps
    WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
    GROUP BY week, agent
), write_week AS (
    SELECT week, agent,
           count() AS write_steps,
           countIf(reconciled) AS reconciled_writes,
           countIf(orphan) AS orphan_writes
    FROM budgetscope_write_steps
    WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
    GROUP BY week, agent
), key_week AS (
    SELECT week, agent, step_key, sum(consumption_ms) AS consumption_ms
    FROM budgetscope_steps
    WHERE is_top_level AND run_exhausted
      AND ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
    GROUP BY week, agent, step_key
), culprit_week AS (
    SELECT week, agent, culprit_key AS step_key, count() AS culprit_runs
    FROM r WHERE exhausted GROUP BY week, agent, step_key
), top AS (
    SELECT k.week AS week, k.agent AS agent, k.step_key AS top_culprit,
           k.consumption_ms AS consumption_ms
    FROM key_week k
    LEFT JOIN culprit_week c ON c.week = k.week AND c.agent IS NOT DISTINCT FROM k.agent
                            AND c.step_key = k.step_key
    QUALIFY row_number() OVER (PARTITION BY k.week, k.agent ORDER BY k.consumption_ms DESC,
                               coalesce(c.culprit_runs, 0) DESC, k.step_key) = 1
)
SELECT rw.week AS week,
       rw.agent AS agent,
       rw.runs AS runs,
       rw.budgeted_runs AS budgeted_runs,
       rw.exhausted_runs AS exhausted_runs,
       rw.exhaustion_rate AS exhaustion_rate,
       rw.utilisation_p50 AS utilisation_p50,
       rw.utilisation_p90 AS utilisation_p90,
       rw.utilisation_p99 AS utilisation_p99,
       toInt64(coalesce(sw.steps, 0)) AS steps,
       toInt64(coalesce(sw.client_timeouts, 0)) AS client_timeouts,
       toInt64(coalesce(sw.upstream_errors, 0)) AS upstream_errors,
       toInt64(coalesce(sw.refused, 0)) AS refused,
       toInt64(coalesce(ww.write_steps, 0)) AS write_steps,
       toInt64(coalesce(ww.reconciled_writes, 0)) AS reconciled_writes,
       ww.reconciled_writes / nullIf(ww.write_steps, 0) AS reconciliation_rate,
       toInt64(coalesce(ww.orphan_writes, 0)) AS orphan_writes,
       t.top_culprit AS top_culprit,
       t.consumption_ms / rw.exhausted_budget_ms AS top_culprit_share,
       CAST(coalesce({since_ns:Nullable(Int64)} > rw.week_start_ns, false)
                OR coalesce({until_ns:Nullable(Int64)} < rw.week_start_ns + 604800000000000,
                            false)
                OR {now_ns:Int64} < rw.week_start_ns + 604800000000000, 'Bool') AS partial_week
FROM (SELECT *, toInt64(toUnixTimestamp(toDateTime(toMonday(
                    fromUnixTimestamp64Nano(first_start_ns, 'UTC')), 'UTC'))) * 1000000000
                    AS week_start_ns
      FROM run_week) rw
LEFT JOIN step_week sw ON sw.week = rw.week AND sw.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN write_week ww ON ww.week = rw.week AND ww.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN top t ON t.week = rw.week AND t.agent IS NOT DISTINCT FROM rw.agent
ORDER BY week, agent NULLS LAST;
