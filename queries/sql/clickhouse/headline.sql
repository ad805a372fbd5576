-- name: headline
-- One row: the headline numbers (SPEC §3-§6) over the runs in [since, until) for the agent filter; ClickHouse dialect of sql/headline.sql.
WITH r AS (
    SELECT count() AS runs,
           countIf(budget_ms IS NOT NULL) AS budgeted_runs,
           countIf(budget_ms IS NOT NULL AND exhausted) AS exhausted_runs,
           quantileExactInclusiveIf(0.50)(utilisation, budget_ms IS NOT NULL) AS utilisation_p50,
           quantileExactInclusiveIf(0.99)(utilisation, budget_ms IS NOT NULL) AS utilisation_p99
    FROM budgetscope_runs
    WHERE ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
), s AS (
    SELECT count() AS steps,
           countIf(class = 'client_timeout') AS client_timeouts,
           countIf(class = 'upstream_error') AS upstream_errors
    FROM budgetscope_steps
    WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
), w AS (
    SELECT count() AS write_steps,
           countIf(reconciled) AS reconciled_writes,
           countIf(orphan) AS orphan_writes
    FROM budgetscope_write_steps
    WHERE ({since_ns:Nullable(Int64)} IS NULL OR run_start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR run_start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
)
SELECT r.runs AS runs,
       r.budgeted_runs AS budgeted_runs,
       r.exhausted_runs AS exhausted_runs,
       r.exhausted_runs / nullIf(r.budgeted_runs, 0) AS exhaustion_rate,
       if(r.budgeted_runs = 0, NULL, r.utilisation_p50) AS utilisation_p50,
       if(r.budgeted_runs = 0, NULL, r.utilisation_p99) AS utilisation_p99,
       s.steps AS steps,
       s.client_timeouts AS client_timeouts,
       s.client_timeouts / nullIf(s.steps, 0) AS client_timeout_rate,
       s.upstream_errors AS upstream_errors,
       s.upstream_errors / nullIf(s.steps, 0) AS upstream_error_rate,
       w.write_steps AS write_steps,
       w.reconciled_writes AS reconciled_writes,
       w.reconciled_writes / nullIf(w.write_steps, 0) AS reconciliation_rate,
       w.orphan_writes AS orphan_writes
FROM r CROSS JOIN s CROSS JOIN w;
