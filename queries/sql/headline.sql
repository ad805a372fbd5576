-- name: headline
-- One row: the headline numbers (docs/metrics.md §3-§6) over the runs that started in [since, until) for the agent filter; the Overview, /metrics and `check` all read this.
-- The one definition of each (the weekly report, docs/metrics.md §7, applies the same ones
-- per week):
-- exhaustion_rate = exhausted runs / runs with a known budget; utilisation_p50/p99 over the runs
-- with a known budget, interpolated linearly (quantile_cont, as numpy's default;
-- docs/metrics.md §5); client_timeout_rate and upstream_error_rate = steps of that class / steps;
-- reconciliation_rate = reconciled writes / write steps; orphan_writes a count. A rate with
-- nothing to divide by is NULL (no data), never 0, so that an alert on it cannot fire or clear
-- on an empty window, and a percentile over no run is NULL.
-- Steps and writes carry their run's start (run_start_ns), so no join to runs is needed.
-- Tokens and dollars (docs/metrics.md §11): tokens and cost_nano (Σ known cost, integer
-- nano-dollars) are summed in HUGEINT and handed over as decimal text, exact past BIGINT
-- (queries/signals.py reads them as Python ints);
-- usd_exhaustion_rate = dollar-exhausted runs / runs budgeted in dollars (usd_exhausted known:
-- a known B$, or one enforced elsewhere, §11.5), token_exhaustion_rate likewise;
-- unpriced_steps = Σ top-level steps with an unpriced call; weekly_budget_utilisation = the
-- largest, over the agents with a weekly dollar budget and the ISO weeks the filter's runs
-- started in, of the runs' Σ cost in that week ÷ that budget (§11.8), with the agent and week
-- it belongs to (ties: the later week, then the agent later by name). Over a window that starts mid-week, that
-- week counts only the window's runs, as the weekly report does under the same filter.
WITH r AS (
    SELECT count(*) AS runs,
           count(*) FILTER (WHERE budget_ms IS NOT NULL) AS budgeted_runs,
           count(*) FILTER (WHERE budget_ms IS NOT NULL AND exhausted) AS exhausted_runs,
           quantile_cont(utilisation, 0.50) FILTER (WHERE budget_ms IS NOT NULL)
               AS utilisation_p50,
           quantile_cont(utilisation, 0.99) FILTER (WHERE budget_ms IS NOT NULL)
               AS utilisation_p99,
           count(*) FILTER (WHERE usd_exhausted IS NOT NULL) AS usd_budgeted_runs,
           count(*) FILTER (WHERE usd_exhausted) AS usd_exhausted_runs,
           count(*) FILTER (WHERE tokens_exhausted IS NOT NULL) AS token_budgeted_runs,
           count(*) FILTER (WHERE tokens_exhausted) AS token_exhausted_runs,
           sum(CAST(tokens AS HUGEINT)) AS tokens,
           sum(CAST(cost_nano AS HUGEINT)) AS cost_nano,
           count(*) FILTER (WHERE NOT cost_complete) AS incomplete_cost_runs,
           sum(unpriced_steps) AS unpriced_steps
    FROM runs
    WHERE /*@run_filter(start_ns)*/
), spend AS (
    SELECT agent, week, sum(CAST(cost_nano AS HUGEINT)) AS cost_nano
    FROM runs
    WHERE /*@run_filter(start_ns)*/
    GROUP BY agent, week
), weekly AS (
    SELECT CAST(p.cost_nano AS DOUBLE)
               / CAST(coalesce(own.usd_per_week_nano, fallback.usd_per_week_nano) AS DOUBLE)
               AS utilisation,
           p.agent, p.week
    FROM spend p
    LEFT JOIN declared_budgets own ON own.scope = 'agent' AND own.agent = p.agent
    LEFT JOIN declared_budgets fallback ON fallback.scope = 'default'
    WHERE coalesce(own.usd_per_week_nano, fallback.usd_per_week_nano) > 0
), wk AS (
    SELECT max(utilisation) AS weekly_budget_utilisation,
           arg_max(agent, (utilisation, week, agent)) AS weekly_budget_agent,
           arg_max(week, (utilisation, week, agent)) AS weekly_budget_week
    FROM weekly
), s AS (
    SELECT count(*) AS steps,
           count(*) FILTER (WHERE class = 'client_timeout') AS client_timeouts,
           count(*) FILTER (WHERE class = 'upstream_error') AS upstream_errors
    FROM steps
    WHERE /*@run_filter(run_start_ns)*/
), w AS (
    SELECT count(*) AS write_steps,
           count(*) FILTER (WHERE reconciled) AS reconciled_writes,
           count(*) FILTER (WHERE orphan) AS orphan_writes
    FROM write_steps
    WHERE /*@run_filter(run_start_ns)*/
)
SELECT r.runs,
       r.budgeted_runs,
       r.exhausted_runs,
       r.exhausted_runs / nullif(r.budgeted_runs, 0) AS exhaustion_rate,
       r.utilisation_p50,
       r.utilisation_p99,
       s.steps,
       s.client_timeouts,
       s.client_timeouts / nullif(s.steps, 0) AS client_timeout_rate,
       s.upstream_errors,
       s.upstream_errors / nullif(s.steps, 0) AS upstream_error_rate,
       w.write_steps,
       w.reconciled_writes,
       w.reconciled_writes / nullif(w.write_steps, 0) AS reconciliation_rate,
       w.orphan_writes,
       r.usd_budgeted_runs,
       r.usd_exhausted_runs,
       r.usd_exhausted_runs / nullif(r.usd_budgeted_runs, 0) AS usd_exhaustion_rate,
       r.token_budgeted_runs,
       r.token_exhausted_runs,
       r.token_exhausted_runs / nullif(r.token_budgeted_runs, 0) AS token_exhaustion_rate,
       CAST(coalesce(r.tokens, 0) AS VARCHAR) AS tokens,
       CAST(coalesce(r.cost_nano, 0) AS VARCHAR) AS cost_nano,
       r.incomplete_cost_runs,
       CAST(coalesce(r.unpriced_steps, 0) AS BIGINT) AS unpriced_steps,
       wk.weekly_budget_utilisation,
       wk.weekly_budget_agent,
       wk.weekly_budget_week
FROM r, s, w, wk;
