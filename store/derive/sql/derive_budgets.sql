-- name: derive_budgets
-- Re-measure the stored runs and steps of the traces in touched_traces against the declared budgets, without recognising their spans again (docs/guide.md#declaring-budgets).
--
-- A change of a declared budget or cap moves only what depends on B: the budget, deadline,
-- window, exhaustion, utilisation, allocations, consumption shares and blame. The steps, their
-- classes, levels and tree, and each run's agent and latest end, stay as the last derivation
-- stored them, so this reads them back (with the span's own budget numbers, which the stored
-- rows fold into B and allocations) and hands them to derive_measure.sql, the part of the
-- derivation that applies B. A trace with spans not derived yet is derived in full instead
-- (store/derive/pending.py): what is stored here is what its spans gave.
CREATE OR REPLACE TEMP TABLE derive_seen_before AS
SELECT DISTINCT trace_id FROM touched_traces;

-- The touched traces' own budget numbers, read once (a run span's budget.total_ms and
-- deadline, a step's budget.allocated_ms).
CREATE OR REPLACE TEMP TABLE derive_own_budgets AS
SELECT trace_id, span_id, budget_total_ms, budget_deadline_unix_ms, budget_allocated_ms
FROM spans
WHERE trace_id IN (SELECT trace_id FROM touched_traces)
  AND (budget_total_ms IS NOT NULL OR budget_deadline_unix_ms IS NOT NULL
       OR budget_allocated_ms IS NOT NULL);

CREATE OR REPLACE TEMP TABLE derive_run_facts AS
SELECT r.run_id, r.trace_id, r.span_id, r.agent, r.start_ns, r.end_ns,
       o.budget_total_ms, o.budget_deadline_unix_ms, r.reserve_ms, r.outcome,
       r.latest_end_ns, r.root_missing, r.week,
       -- the run's own token and dollar budgets (docs/metrics.md §11.5): a stored budget
       -- that came from the span is the span's
       CASE WHEN r.token_budget_source = 'span' THEN r.token_budget END AS budget_total_tokens,
       CASE WHEN r.usd_budget_source = 'span' THEN r.usd_budget_nano END
           AS budget_total_usd_nano,
       r.exhausted_by
FROM runs r
LEFT JOIN derive_own_budgets o ON o.trace_id = r.trace_id AND o.span_id = r.span_id
WHERE r.trace_id IN (SELECT trace_id FROM touched_traces);

CREATE OR REPLACE TEMP TABLE derive_step_facts AS
SELECT st.* EXCLUDE (allocated_ms, utilisation, consumption_ms, agent, run_start_ns,
                     run_has_budget, run_exhausted,
                     -- measured again by derive_cost.sql
                     input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
                     reasoning_tokens, tokens, cost_nano, cost_complete, cost_source, unmetered,
                     possibly_billed, consumption_usd_nano, consumption_tokens, cost_share,
                     token_share),
       o.budget_allocated_ms AS own_allocated_ms
FROM steps st
LEFT JOIN derive_own_budgets o ON o.trace_id = st.trace_id AND o.span_id = st.span_id
WHERE st.trace_id IN (SELECT trace_id FROM touched_traces);

-- What the consumption share reads of the step tree: each step's run span, and the model a
-- tool is lifted out of.
CREATE OR REPLACE TEMP TABLE derive_tree AS
SELECT s.trace_id, s.span_id, r.span_id AS run_span_id, l.lifted_from
FROM derive_step_facts s
JOIN derive_run_facts r ON r.run_id = s.run_id
LEFT JOIN step_lifts l ON l.trace_id = s.trace_id AND l.run_span_id = r.span_id
                      AND l.span_id = s.span_id;

DROP TABLE derive_own_budgets;

-- The traces' metered spans as the last derivation found them (docs/metrics.md §11.2), for
-- derive_cost.sql to price and sum again: a change of prices or of a declared token or dollar
-- budget moves only their costs and what depends on them.
CREATE OR REPLACE TEMP TABLE derive_metered AS
SELECT * EXCLUDE (cost_nano, cost_source, price_ref)
FROM metered_spans
WHERE trace_id IN (SELECT trace_id FROM touched_traces);

-- gates: what the statements of derive_cost.sql and derive_measure.sql have to do here
SELECT true AS seen_before, count(*) > 0 AS usage, count(*) = 0 AS no_usage
FROM derive_metered;
