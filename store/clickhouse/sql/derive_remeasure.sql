-- name: derive_remeasure
-- Read the stored runs, steps and metered spans back for a re-measure: the declarations or prices changed, the spans did not (as store/derive/sql/derive_budgets.sql).
--
-- A change of a declared budget, a cap or a price moves only what depends on them: B, the
-- deadline, window, exhaustion, utilisation, allocations, consumption shares and blame, the
-- metered spans' costs and the sums, budgets and culprits in tokens and dollars. The steps, their
-- classes, levels and tree, each run's agent and latest end, and which spans are metered stay as
-- the last build stored them (store.clickhouse.ensure_derived re-measures only when otel_traces
-- and otel_logs are as that build read them). This leaves what derive_steps.sql and
-- derive_usage.sql leave for the measure (budgetscope_tmp_run_facts, budgetscope_tmp_step_facts,
-- budgetscope_tmp_tree, budgetscope_tmp_metered), then derive_budgeted.sql, derive_cost.sql and
-- derive_measure.sql run as in a build; the tables it does not change are copied to the *_next
-- tables derive_measure.sql exchanges, and the derive state keeps the spans the build read,
-- with the fingerprints of the declarations and prices now (`declared`, `prices`: derive_state.sql's).

-- The runs without B: the span's own budget numbers (budgetscope_own_budgets), and its token and
-- dollar budgets (a stored budget that came from the span is the span's).
CREATE TABLE budgetscope_tmp_run_facts ENGINE = Memory SETTINGS compress = 1 AS
SELECT r.run_id AS run_id, r.trace_id AS trace_id, r.span_id AS span_id, r.agent AS agent,
       r.start_ns AS start_ns, r.end_ns AS end_ns,
       o.budget_total_ms AS budget_total_ms,
       o.budget_deadline_unix_ms AS budget_deadline_unix_ms,
       r.reserve_ms AS reserve_ms, r.outcome AS outcome, r.latest_end_ns AS latest_end_ns,
       r.root_missing AS root_missing,
       if(r.token_budget_source = 'span', r.token_budget, NULL) AS budget_total_tokens,
       if(r.usd_budget_source = 'span', r.usd_budget_nano, NULL) AS budget_total_usd_nano,
       r.exhausted_by AS exhausted_by, r.week AS week
FROM budgetscope_runs r
LEFT JOIN budgetscope_own_budgets o ON o.trace_id = r.trace_id AND o.span_id = r.span_id;

-- The steps without what B, the caps and the prices give them.
CREATE TABLE budgetscope_tmp_step_facts ENGINE = Memory SETTINGS compress = 1 AS
SELECT st.* EXCEPT (allocated_ms, utilisation, run_has_budget, consumption_ms, run_exhausted,
                    input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
                    reasoning_tokens, tokens, cost_nano, cost_complete, cost_source, unmetered,
                    possibly_billed, consumption_usd_nano, consumption_tokens, cost_share,
                    token_share),
       o.o_allocated_ms AS own_allocated_ms
FROM budgetscope_steps st
-- (named apart: ClickHouse names st.*'s columns `st.x` where a joined table has an `x` too)
LEFT JOIN (SELECT trace_id AS o_trace_id, span_id AS o_span_id,
                  budget_allocated_ms AS o_allocated_ms
           FROM budgetscope_own_budgets) o ON o.o_trace_id = st.trace_id
                                          AND o.o_span_id = st.span_id;

-- What the consumption share reads of the step tree: each step's run span, and the model step
-- a tool is lifted out of.
CREATE TABLE budgetscope_tmp_tree ENGINE = Memory SETTINGS compress = 1 AS
SELECT s.trace_id AS trace_id, s.span_id AS span_id, r.span_id AS run_span_id,
       l.lifted_from AS lifted_from
FROM budgetscope_tmp_step_facts s
JOIN budgetscope_tmp_run_facts r ON r.run_id = s.run_id
LEFT JOIN budgetscope_step_lifts l ON l.trace_id = s.trace_id AND l.run_span_id = r.span_id
                                  AND l.span_id = s.span_id;

-- The metered spans as the build found them, for derive_cost.sql to price and sum again.
CREATE TABLE budgetscope_tmp_metered ENGINE = Memory SETTINGS compress = 1 AS
SELECT * EXCEPT (cost_nano, cost_source, price_ref) FROM budgetscope_metered_spans;

-- What the spans alone give, unchanged.
CREATE TABLE budgetscope_derivation_notes_next AS budgetscope_derivation_notes;
INSERT INTO budgetscope_derivation_notes_next SELECT * FROM budgetscope_derivation_notes;
CREATE TABLE budgetscope_own_budgets_next AS budgetscope_own_budgets;
INSERT INTO budgetscope_own_budgets_next SELECT * FROM budgetscope_own_budgets;
CREATE TABLE budgetscope_step_lifts_next AS budgetscope_step_lifts;
INSERT INTO budgetscope_step_lifts_next SELECT * FROM budgetscope_step_lifts;

CREATE TABLE budgetscope_derive_state_next AS budgetscope_derive_state;
INSERT INTO budgetscope_derive_state_next
SELECT spans, newest_span, traces, now64(3) AS derived_at, {declared:String} AS declared,
       log_rows, {prices:String} AS prices
FROM budgetscope_derive_state;
