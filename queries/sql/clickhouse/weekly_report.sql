-- name: weekly_report
-- One row per ISO week (UTC, Monday start, of the run start) × agent: the docs/metrics.md §7 columns; ClickHouse dialect of sql/weekly_report.sql.
-- Steps carry their run's week here (budgetscope_steps.week, set by derive_build.sql), so they
-- are grouped by week directly; the DuckDB file sums them per run start first and joins the
-- weeks. Same groups, same sums. The cost columns (docs/metrics.md §11.9) after partial_week
-- say the same as the DuckDB file's, in the same order; amounts are nano-dollars there too.
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
           sumIfOrNull(budget_ms, exhausted) AS exhausted_budget_ms,
           sum(toInt128(tokens)) AS tokens,
           sum(toInt128(cost_nano)) AS cost_nano,
           countIf(NOT cost_complete) AS incomplete_cost_runs,
           sum(unpriced_steps) AS unpriced_steps,
           sum(unmetered_billable_steps) AS unmetered_billable_steps,
           countIf(usd_exhausted IS NOT NULL) AS usd_budgeted_runs,
           countIf(usd_exhausted) AS usd_exhausted_runs,
           quantileExactInclusive(0.50)(cost_utilisation) AS cost_utilisation_p50,
           quantileExactInclusive(0.90)(cost_utilisation) AS cost_utilisation_p90,
           quantileExactInclusive(0.99)(cost_utilisation) AS cost_utilisation_p99,
           sum(toNullable(toInt128(overrun_usd_nano))) AS overrun_usd_nano,
           sumIfOrNull(toInt128(usd_budget_nano), usd_exhausted) AS usd_exhausted_budget_nano,
           countIf(tokens_exhausted IS NOT NULL) AS token_budgeted_runs,
           countIf(tokens_exhausted) AS token_exhausted_runs,
           quantileExactInclusive(0.90)(token_utilisation) AS token_utilisation_p90
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
), usd_exhausted AS (
    SELECT run_id, week, agent, cost_culprit_key FROM r
    WHERE usd_exhausted AND usd_budget_nano IS NOT NULL
), cost_key_week AS (
    SELECT e.week AS week, e.agent AS agent, s.step_key AS step_key,
           sum(toInt128(s.consumption_usd_nano)) AS consumption_nano
    FROM budgetscope_steps s
    JOIN usd_exhausted e ON e.run_id = s.run_id
    WHERE s.is_top_level AND s.consumption_usd_nano > 0
      AND ({since_ns:Nullable(Int64)} IS NULL OR s.run_start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR s.run_start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR s.agent = {agent:Nullable(String)})
    GROUP BY e.week, e.agent, s.step_key
), cost_culprit_week AS (
    SELECT week, agent, cost_culprit_key AS step_key, count() AS culprit_runs
    FROM usd_exhausted GROUP BY week, agent, step_key
), cost_top AS (
    SELECT k.week AS week, k.agent AS agent, k.step_key AS top_cost_culprit,
           k.consumption_nano AS consumption_nano
    FROM cost_key_week k
    LEFT JOIN cost_culprit_week c ON c.week = k.week AND c.agent IS NOT DISTINCT FROM k.agent
                                 AND c.step_key = k.step_key
    QUALIFY row_number() OVER (PARTITION BY k.week, k.agent ORDER BY k.consumption_nano DESC,
                               coalesce(c.culprit_runs, 0) DESC, k.step_key) = 1
), weekly_budget AS (
    -- each agent's weekly dollar budget: its own declaration, else the default's
    SELECT a.agent AS agent,
           coalesce(own.usd_per_week_nano, fallback.usd_per_week_nano) AS budget_nano
    FROM (SELECT DISTINCT agent FROM r) a
    LEFT JOIN budgetscope_declared_budgets own ON own.scope = 'agent' AND own.agent = a.agent
    LEFT JOIN budgetscope_declared_budgets fallback ON fallback.scope = 'default'
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
                OR {now_ns:Int64} < rw.week_start_ns + 604800000000000, 'Bool') AS partial_week,
       toInt64(least(coalesce(rw.tokens, 0), toInt128('9223372036854775807'))) AS tokens,
       toString(coalesce(rw.cost_nano, 0)) AS cost_usd,
       rw.incomplete_cost_runs AS incomplete_cost_runs,
       toInt64(coalesce(rw.unpriced_steps, 0)) AS unpriced_steps,
       toInt64(coalesce(rw.unmetered_billable_steps, 0)) AS unmetered_billable_steps,
       rw.usd_budgeted_runs AS usd_budgeted_runs,
       rw.usd_exhausted_runs AS usd_exhausted_runs,
       rw.usd_exhausted_runs / nullIf(rw.usd_budgeted_runs, 0) AS usd_exhaustion_rate,
       rw.cost_utilisation_p50 AS cost_utilisation_p50,
       rw.cost_utilisation_p90 AS cost_utilisation_p90,
       rw.cost_utilisation_p99 AS cost_utilisation_p99,
       toString(rw.overrun_usd_nano) AS overrun_usd,
       ct.top_cost_culprit AS top_cost_culprit,
       toFloat64(ct.consumption_nano) / toFloat64(nullIf(rw.usd_exhausted_budget_nano, 0))
           AS top_cost_culprit_share,
       rw.token_budgeted_runs AS token_budgeted_runs,
       rw.token_exhausted_runs AS token_exhausted_runs,
       rw.token_utilisation_p90 AS token_utilisation_p90,
       wb.budget_nano AS weekly_budget_usd,
       toFloat64(rw.cost_nano) / toFloat64(nullIf(wb.budget_nano, 0))
           AS weekly_budget_utilisation
FROM (SELECT *, toInt64(toUnixTimestamp(toDateTime(toMonday(
                    fromUnixTimestamp64Nano(first_start_ns, 'UTC')), 'UTC'))) * 1000000000
                    AS week_start_ns
      FROM run_week) rw
LEFT JOIN step_week sw ON sw.week = rw.week AND sw.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN write_week ww ON ww.week = rw.week AND ww.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN top t ON t.week = rw.week AND t.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN cost_top ct ON ct.week = rw.week AND ct.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN weekly_budget wb ON wb.agent IS NOT DISTINCT FROM rw.agent
ORDER BY week, agent NULLS LAST;
