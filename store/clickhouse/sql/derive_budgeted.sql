-- name: derive_budgeted
-- The declared budgets and caps applied to the runs and steps: B, the deadline and window, and the steps' allocations (docs/guide.md#declaring-budgets, as store/derive/sql/derive_refresh.sql step 3 and 4).
--
-- Reads budgetscope_tmp_run_facts and budgetscope_tmp_step_facts: a build's (derive_steps.sql,
-- from the spans) or a re-measure's (derive_remeasure.sql, from the stored runs and steps), so
-- that a change of the declarations alone gives what a whole build would, without one. Writes
-- budgetscope_tmp_runs and budgetscope_tmp_steps, which derive_cost.sql and derive_measure.sql
-- read.

-- B is the span's own budget.total_ms, else the budget declared for the run's agent, else the
-- declared default; d = budget.deadline_unix_ms when present, else s + B.
CREATE TABLE budgetscope_tmp_runs ENGINE = Memory SETTINGS compress = 1 AS
WITH declared AS (
    SELECT r.*,
           coalesce(r.budget_total_ms, a.budget_ms, dflt.budget_ms) AS budget_ms,
           multiIf(r.budget_total_ms IS NOT NULL, 'span',
                   coalesce(a.budget_ms, dflt.budget_ms) IS NOT NULL, 'declared',
                   NULL) AS budget_source
    FROM budgetscope_tmp_run_facts r
    LEFT JOIN (SELECT agent, budget_ms FROM budgetscope_declared_budgets
               WHERE scope = 'agent') a ON a.agent = r.agent
    LEFT JOIN (SELECT budget_ms FROM budgetscope_declared_budgets
               WHERE scope = 'default' LIMIT 1) dflt ON true
), budgeted AS (
    SELECT *,
           if(budget_ms IS NOT NULL, coalesce(
               budget_deadline_unix_ms * 1000000, start_ns + budget_ms * 1000000), NULL)
               AS deadline_ns
    FROM declared
)
SELECT r.run_id AS run_id, r.trace_id AS trace_id, r.span_id AS span_id, r.agent AS agent,
       r.start_ns AS start_ns, r.end_ns AS end_ns,
       r.budget_ms AS budget_ms,
       r.budget_source AS budget_source,
       r.deadline_ns AS deadline_ns,
       -- e = min(run end, d), kept >= s so that an absurd deadline gives an empty window
       if(r.deadline_ns IS NOT NULL, greatest(r.start_ns, least(r.end_ns, r.deadline_ns)), NULL)
           AS window_end_ns,
       r.reserve_ms AS reserve_ms,
       r.outcome AS outcome,
       (r.end_ns - r.start_ns) / 1e6 AS elapsed_ms,
       ((r.end_ns - r.start_ns) / 1e6) / nullIf(r.budget_ms, 0) AS utilisation,
       r.latest_end_ns AS latest_end_ns,
       if(r.deadline_ns IS NOT NULL, greatest(0, r.latest_end_ns - r.deadline_ns) / 1e6, NULL)
           AS overrun_ms,
       lowerUTF8(trimBoth(r.outcome)) AS known_outcome,
       r.root_missing AS root_missing,
       r.budget_total_tokens AS budget_total_tokens,
       r.budget_total_usd_nano AS budget_total_usd_nano,
       r.exhausted_by AS exhausted_by, r.week AS week
FROM budgeted r;

-- A declared cap for the step's key gives a step without budget.allocated_ms the allocation
-- min(cap, B - (step start - s)), in ns, never below 0; the cap alone when B is unknown.
CREATE TABLE budgetscope_tmp_steps ENGINE = Memory SETTINGS compress = 1 AS
-- (the joined columns named apart: ClickHouse names f.*'s columns `f.x` where a joined table
-- has an `x` too)
SELECT f.* EXCEPT (own_allocated_ms),
       CAST(multiIf(c.c_cap_ms IS NULL, NULL,
                    r.r_budget_ms IS NULL, c.c_cap_ms * 1000000,
                    least(c.c_cap_ms * 1000000,
                          greatest(0, r.r_budget_ms * 1000000 - (f.start_ns - r.r_start_ns)))),
            'Nullable(Int64)') AS declared_allocation_ns,
       coalesce(f.own_allocated_ms, intDiv(declared_allocation_ns, 1000000)) AS allocated_ms,
       ((f.end_ns - f.start_ns) / 1e6)
           / nullIf(coalesce(toFloat64(f.own_allocated_ms), declared_allocation_ns / 1e6), 0)
           AS utilisation,
       CAST(r.r_budget_ms IS NOT NULL, 'Bool') AS run_has_budget
FROM budgetscope_tmp_step_facts f
JOIN (SELECT run_id AS r_run_id, budget_ms AS r_budget_ms, start_ns AS r_start_ns
      FROM budgetscope_tmp_runs) r ON r.r_run_id = f.run_id
LEFT JOIN (SELECT step_key AS c_step_key, cap_ms AS c_cap_ms
           FROM budgetscope_declared_step_caps) c ON c.c_step_key = f.step_key;
