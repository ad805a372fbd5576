-- name: weekly_report
-- One row per ISO week (UTC, Monday start, of the run start) × agent: the docs/metrics.md §7 columns.
-- Budget metrics (exhausted_runs, exhaustion_rate, utilisation_*) cover the runs with a known
-- budget, counted in budgeted_runs (the rate's denominator, so the rate can be recomputed from
-- the CSV); `runs`, `steps` and the failure and write counts cover every run.
-- top_culprit is the week's first attribution row: the step key with the largest budget share
-- over the exhausted runs (ties: more culprit runs, then the key); top_culprit_share its share.
-- partial_week: the filter's range ($since_ns, $until_ns) or the present ($now_ns) cuts the
-- week [Monday 00:00 UTC, next Monday) short, so its counts are not the whole week's.
-- Where the steps are counted (at 1.4M spans, ~940k steps; bench/README.md): `steps` and
-- `refused` are the runs' own counts (runs.steps, runs.refused_steps, which the derivation
-- counts from the same step rows), so that only the steps of another class than ok, the write
-- and reconcile steps and the exhausted runs' top-level steps are read, each with a filter
-- the scan applies. Those are grouped by the Monday of their run's start and the agent (a few
-- dozen groups, not one per run start), and the Monday is named as its ISO week once per group:
-- a Monday and every instant of its week share one ISO week, so the groups are the runs'
-- weeks. A write step is reconciled as in the write_steps view (docs/metrics.md §6): a
-- reconcile step of its run with its idempotency key, or a reconcile link naming it; an
-- orphan is an uncertain write that is not (the view builds every reconciliation, which this
-- report does not count: 80 → 27 ms of CPU).
-- The cost columns (docs/metrics.md §11.9) come after partial_week, so that every earlier
-- column keeps its position. Amounts are integer nano-dollars, summed in HUGEINT and handed
-- over as their decimal text (exact past BIGINT; dollars in queries/reports.py); a week's
-- tokens stop at BIGINT's largest rather than fail.
-- A run is budgeted in a dimension when its exhaustion there is known (usd_exhausted not NULL:
-- a known budget, or one enforced elsewhere, §11.5); percentiles are over the runs with a
-- known budget (utilisation NULL otherwise); overrun_usd sums the runs with a known B$.
-- top_cost_culprit is the step key with the largest Σ consumption over the week's
-- usd-exhausted runs with a known B$, and its share that Σ ÷ their Σ B$ (ties: more cost
-- culprit runs, then the key); none when no step spent anything there. Those steps are the
-- one join of steps to runs here (steps carry no dollar exhaustion of their run). The weekly
-- budget is the agent's declared --usd-per-week, else the default's, as declared now
-- (declarations keep no history).
WITH r AS (
    SELECT * FROM runs
    WHERE /*@run_filter(start_ns)*/
), run_week AS (
    SELECT week, agent,
           min(start_ns) AS first_start_ns,
           count(*) AS runs,
           count(*) FILTER (WHERE budget_ms IS NOT NULL) AS budgeted_runs,
           count(*) FILTER (WHERE exhausted) AS exhausted_runs,
           count(*) FILTER (WHERE exhausted)
               / nullif(count(*) FILTER (WHERE budget_ms IS NOT NULL), 0) AS exhaustion_rate,
           quantile_cont(utilisation, 0.50) AS utilisation_p50,
           quantile_cont(utilisation, 0.90) AS utilisation_p90,
           quantile_cont(utilisation, 0.99) AS utilisation_p99,
           sum(budget_ms) FILTER (WHERE exhausted) AS exhausted_budget_ms,
           sum(steps) AS steps,
           sum(refused_steps) AS refused,
           sum(CAST(tokens AS HUGEINT)) AS tokens,
           sum(CAST(cost_nano AS HUGEINT)) AS cost_nano,
           count(*) FILTER (WHERE NOT cost_complete) AS incomplete_cost_runs,
           sum(unpriced_steps) AS unpriced_steps,
           sum(unmetered_billable_steps) AS unmetered_billable_steps,
           count(*) FILTER (WHERE usd_exhausted IS NOT NULL) AS usd_budgeted_runs,
           count(*) FILTER (WHERE usd_exhausted) AS usd_exhausted_runs,
           quantile_cont(cost_utilisation, 0.50) AS cost_utilisation_p50,
           quantile_cont(cost_utilisation, 0.90) AS cost_utilisation_p90,
           quantile_cont(cost_utilisation, 0.99) AS cost_utilisation_p99,
           sum(CAST(overrun_usd_nano AS HUGEINT)) AS overrun_usd_nano,
           sum(CAST(usd_budget_nano AS HUGEINT)) FILTER (WHERE usd_exhausted)
               AS usd_exhausted_budget_nano,
           count(*) FILTER (WHERE tokens_exhausted IS NOT NULL) AS token_budgeted_runs,
           count(*) FILTER (WHERE tokens_exhausted) AS token_exhausted_runs,
           quantile_cont(token_utilisation, 0.90) AS token_utilisation_p90
    FROM r GROUP BY ALL
), failure_monday AS (
    SELECT date_trunc('week', make_timestamp(run_start_ns // 1000)) AS monday, agent,
           count(*) FILTER (WHERE class = 'client_timeout') AS client_timeouts,
           count(*) FILTER (WHERE class = 'upstream_error') AS upstream_errors
    FROM steps
    WHERE class <> 'ok'
      AND /*@run_filter(run_start_ns)*/
    GROUP BY ALL
), reconcile_keys AS (
    SELECT DISTINCT run_id, idempotency_key FROM steps
    WHERE kind = 'reconcile' AND idempotency_key IS NOT NULL
), link_targets AS (
    SELECT DISTINCT target_trace_id, target_span_id FROM reconcile_links
), write_monday AS (
    SELECT date_trunc('week', make_timestamp(run_start_ns // 1000)) AS monday, agent,
           count(*) AS write_steps,
           count(*) FILTER (WHERE reconciled) AS reconciled_writes,
           count(*) FILTER (WHERE is_uncertain AND NOT reconciled) AS orphan_writes
    FROM (
        SELECT w.run_start_ns, w.agent, w.is_uncertain,
               k.run_id IS NOT NULL OR l.target_span_id IS NOT NULL AS reconciled
        FROM steps w
        LEFT JOIN reconcile_keys k ON k.run_id = w.run_id
                                  AND k.idempotency_key = w.idempotency_key
        LEFT JOIN link_targets l ON l.target_trace_id = w.trace_id
                                AND l.target_span_id = w.span_id
        WHERE w.is_write
          AND /*@run_filter(w.run_start_ns)*/
    )
    GROUP BY ALL
), key_monday AS (
    SELECT date_trunc('week', make_timestamp(run_start_ns // 1000)) AS monday, agent,
           step_key, sum(consumption_ms) AS consumption_ms
    FROM steps
    WHERE is_top_level AND run_exhausted
      AND /*@run_filter(run_start_ns)*/
    GROUP BY ALL
), step_week AS (
    SELECT printf('%d-W%02d', isoyear(monday), week(monday)) AS week, agent, client_timeouts,
           upstream_errors
    FROM failure_monday
), write_week AS (
    SELECT printf('%d-W%02d', isoyear(monday), week(monday)) AS week, agent, write_steps,
           reconciled_writes, orphan_writes
    FROM write_monday
), key_week AS (
    SELECT printf('%d-W%02d', isoyear(monday), week(monday)) AS week, agent, step_key,
           consumption_ms
    FROM key_monday
), culprit_week AS (
    SELECT week, agent, culprit_key AS step_key, count(*) AS culprit_runs
    FROM r WHERE exhausted GROUP BY ALL
), top AS (
    SELECT k.week, k.agent, k.step_key AS top_culprit, k.consumption_ms
    FROM key_week k
    LEFT JOIN culprit_week c ON c.week = k.week AND c.agent IS NOT DISTINCT FROM k.agent
                            AND c.step_key = k.step_key
    QUALIFY row_number() OVER (PARTITION BY k.week, k.agent ORDER BY k.consumption_ms DESC,
                               coalesce(c.culprit_runs, 0) DESC, k.step_key) = 1
), usd_exhausted AS (
    SELECT run_id, week, agent, cost_culprit_key FROM r
    WHERE usd_exhausted AND usd_budget_nano IS NOT NULL
), cost_key_week AS (
    SELECT e.week, e.agent, s.step_key,
           sum(CAST(s.consumption_usd_nano AS HUGEINT)) AS consumption_nano
    FROM steps s
    JOIN usd_exhausted e ON e.run_id = s.run_id
    WHERE s.is_top_level AND s.consumption_usd_nano > 0
      AND /*@run_filter(s.run_start_ns)*/
    GROUP BY ALL
), cost_culprit_week AS (
    SELECT week, agent, cost_culprit_key AS step_key, count(*) AS culprit_runs
    FROM usd_exhausted GROUP BY ALL
), cost_top AS (
    SELECT k.week, k.agent, k.step_key AS top_cost_culprit, k.consumption_nano
    FROM cost_key_week k
    LEFT JOIN cost_culprit_week c ON c.week = k.week AND c.agent IS NOT DISTINCT FROM k.agent
                                 AND c.step_key = k.step_key
    QUALIFY row_number() OVER (PARTITION BY k.week, k.agent ORDER BY k.consumption_nano DESC,
                               coalesce(c.culprit_runs, 0) DESC, k.step_key) = 1
), weekly_budget AS (
    -- each agent's weekly dollar budget: its own declaration of that dimension, else the
    -- default's (docs/metrics.md §10, §11.8)
    SELECT a.agent, coalesce(own.usd_per_week_nano, fallback.usd_per_week_nano) AS budget_nano
    FROM (SELECT DISTINCT agent FROM r) a
    LEFT JOIN declared_budgets own ON own.scope = 'agent' AND own.agent = a.agent
    LEFT JOIN declared_budgets fallback ON fallback.scope = 'default'
)
SELECT rw.week,
       rw.agent,
       rw.runs,
       rw.budgeted_runs,
       rw.exhausted_runs,
       rw.exhaustion_rate,
       rw.utilisation_p50,
       rw.utilisation_p90,
       rw.utilisation_p99,
       CAST(rw.steps AS BIGINT) AS steps,
       coalesce(sw.client_timeouts, 0)::BIGINT AS client_timeouts,
       coalesce(sw.upstream_errors, 0)::BIGINT AS upstream_errors,
       CAST(rw.refused AS BIGINT) AS refused,
       coalesce(ww.write_steps, 0)::BIGINT AS write_steps,
       coalesce(ww.reconciled_writes, 0)::BIGINT AS reconciled_writes,
       ww.reconciled_writes / nullif(ww.write_steps, 0) AS reconciliation_rate,
       coalesce(ww.orphan_writes, 0)::BIGINT AS orphan_writes,
       t.top_culprit,
       t.consumption_ms / rw.exhausted_budget_ms AS top_culprit_share,
       coalesce($since_ns::BIGINT > rw.week_start_ns, false)
           OR coalesce($until_ns::BIGINT < rw.week_start_ns + 604800000000000, false)
           OR $now_ns::BIGINT < rw.week_start_ns + 604800000000000 AS partial_week,
       CAST(least(coalesce(rw.tokens, 0), 9223372036854775807) AS BIGINT) AS tokens,
       CAST(coalesce(rw.cost_nano, 0) AS VARCHAR) AS cost_usd,
       rw.incomplete_cost_runs,
       CAST(coalesce(rw.unpriced_steps, 0) AS BIGINT) AS unpriced_steps,
       CAST(coalesce(rw.unmetered_billable_steps, 0) AS BIGINT) AS unmetered_billable_steps,
       rw.usd_budgeted_runs,
       rw.usd_exhausted_runs,
       rw.usd_exhausted_runs / nullif(rw.usd_budgeted_runs, 0) AS usd_exhaustion_rate,
       rw.cost_utilisation_p50,
       rw.cost_utilisation_p90,
       rw.cost_utilisation_p99,
       CAST(rw.overrun_usd_nano AS VARCHAR) AS overrun_usd,
       ct.top_cost_culprit,
       CAST(ct.consumption_nano AS DOUBLE)
           / CAST(nullif(rw.usd_exhausted_budget_nano, 0) AS DOUBLE) AS top_cost_culprit_share,
       rw.token_budgeted_runs,
       rw.token_exhausted_runs,
       rw.token_utilisation_p90,
       wb.budget_nano AS weekly_budget_usd,
       CAST(rw.cost_nano AS DOUBLE) / CAST(nullif(wb.budget_nano, 0) AS DOUBLE)
           AS weekly_budget_utilisation
FROM (SELECT *, epoch_us(date_trunc('week', make_timestamp(first_start_ns // 1000)))::BIGINT
                    * 1000 AS week_start_ns
      FROM run_week) rw
LEFT JOIN step_week sw ON sw.week = rw.week AND sw.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN write_week ww ON ww.week = rw.week AND ww.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN top t ON t.week = rw.week AND t.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN cost_top ct ON ct.week = rw.week AND ct.agent IS NOT DISTINCT FROM rw.agent
LEFT JOIN weekly_budget wb ON wb.agent IS NOT DISTINCT FROM rw.agent
ORDER BY rw.week, rw.agent NULLS LAST;
