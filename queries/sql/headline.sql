-- name: headline
-- One row: the headline numbers (SPEC §3-§6) over the runs that started in [since, until) for the agent filter; the Overview, /metrics and `check` all read this.
-- The one definition of each (the weekly report, SPEC §7, applies the same ones per week):
-- exhaustion_rate = exhausted runs / runs with a known budget; utilisation_p50/p99 over the runs
-- with a known budget, interpolated linearly (quantile_cont, as numpy's default; SPEC §5);
-- client_timeout_rate and upstream_error_rate = steps of that class / steps;
-- reconciliation_rate = reconciled writes / write steps; orphan_writes a count. A rate with
-- nothing to divide by is NULL (no data), never 0, so that an alert on it cannot fire or clear
-- on an empty window, and a percentile over no run is NULL.
-- Steps and writes carry their run's start (run_start_ns), so no join to runs is needed.
WITH r AS (
    SELECT count(*) AS runs,
           count(*) FILTER (WHERE budget_ms IS NOT NULL) AS budgeted_runs,
           count(*) FILTER (WHERE budget_ms IS NOT NULL AND exhausted) AS exhausted_runs,
           quantile_cont(utilisation, 0.50) FILTER (WHERE budget_ms IS NOT NULL)
               AS utilisation_p50,
           quantile_cont(utilisation, 0.99) FILTER (WHERE budget_ms IS NOT NULL)
               AS utilisation_p99
    FROM runs
    WHERE /*@run_filter(start_ns)*/
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
       w.orphan_writes
FROM r, s, w;
