-- name: derive_measure
-- Everything of the derivation that depends on B (docs/metrics.md §4-§6, docs/guide.md#declaring-budgets), from what does not.
--
-- Reads the temp tables derive_run_facts, derive_step_facts, derive_tree (trace_id, span_id,
-- run_span_id, lifted_from) and derive_seen_before, which derive_refresh.sql builds from the
-- spans, and derive_budgets.sql from the stored runs and steps when only a declaration
-- changed, and derive_cost.sql's sums of tokens and dollars by step and by run
-- (derive_step_cost, derive_run_cost) and its spans' costs (derive_costed); applies B$ and
-- Btok as it applies B (docs/metrics.md §11.4-§11.7); replaces the runs, steps and
-- reconcile_links rows of those traces, and drops them.

-- 3b. B, the deadline and the window of each run, and its B$ and Btok.
CREATE OR REPLACE TEMP TABLE derive_runs AS
WITH declared AS (
    -- docs/guide.md#declaring-budgets: B is the span's own budget.total_ms, else the budget
    -- declared for the run's agent, else the declared default. A change of declarations marks the
    -- runs it affects (store/declared/budgets.py), so past runs follow it. B$ and Btok likewise
    -- (§11.5), each dimension on its own: the run's budget.total_usd / budget.total_tokens, else
    -- its agent's declaration of that dimension, else the default's.
    SELECT r.*,
           coalesce(r.budget_total_ms, a.budget_ms, dflt.budget_ms) AS budget_ms,
           CASE WHEN r.budget_total_ms IS NOT NULL THEN 'span'
                WHEN coalesce(a.budget_ms, dflt.budget_ms) IS NOT NULL THEN 'declared'
                END AS budget_source,
           coalesce(r.budget_total_usd_nano, a.usd_nano, dflt.usd_nano) AS usd_budget_nano,
           CASE WHEN r.budget_total_usd_nano IS NOT NULL THEN 'span'
                WHEN coalesce(a.usd_nano, dflt.usd_nano) IS NOT NULL THEN 'declared' END
               AS usd_budget_source,
           coalesce(r.budget_total_tokens, a.tokens, dflt.tokens) AS token_budget,
           CASE WHEN r.budget_total_tokens IS NOT NULL THEN 'span'
                WHEN coalesce(a.tokens, dflt.tokens) IS NOT NULL THEN 'declared' END
               AS token_budget_source
    FROM derive_run_facts r
    LEFT JOIN declared_budgets a ON a.scope = 'agent' AND a.agent = r.agent
    LEFT JOIN declared_budgets dflt ON dflt.scope = 'default'
), budgeted AS (
    -- d = budget.deadline_unix_ms when present, else s + B
    SELECT *,
           CASE WHEN budget_ms IS NOT NULL THEN coalesce(
               budget_deadline_unix_ms * 1000000, start_ns + budget_ms * 1000000) END
               AS deadline_ns
    FROM declared
)
SELECT r.run_id,
       r.trace_id, r.span_id,
       r.agent,
       r.start_ns, r.end_ns,
       r.budget_ms,
       r.budget_source,
       r.deadline_ns,
       -- e = min(run end, d), kept >= s so that an absurd deadline gives an empty window
       CASE WHEN r.deadline_ns IS NOT NULL
            THEN greatest(r.start_ns, least(r.end_ns, r.deadline_ns)) END AS window_end_ns,
       r.reserve_ms,
       r.outcome,
       (r.end_ns - r.start_ns) / 1e6 AS elapsed_ms,
       ((r.end_ns - r.start_ns) / 1e6) / nullif(r.budget_ms, 0) AS utilisation,
       r.latest_end_ns,
       CASE WHEN r.deadline_ns IS NOT NULL
            THEN greatest(0, r.latest_end_ns - r.deadline_ns) / 1e6 END AS overrun_ms,
       lower(trim(r.outcome)) AS known_outcome,
       r.root_missing,
       r.week,
       r.exhausted_by, r.usd_budget_nano, r.usd_budget_source, r.token_budget,
       r.token_budget_source
FROM budgeted r;

-- gates: a run with a budget in tokens or dollars, where some span carries usage: its
-- culprits and crossing are to be found (§11.6 defines them only for a run with that budget).
-- And `timed`: a run with a time budget B, the only runs whose steps have a consumption and
-- whose run a culprit and a holder (5 and 6 below); in a turn without one both tables are
-- made empty instead (the two statements cost ~13 ms to plan and run, whatever they read).
-- when: usage
SELECT coalesce(bool_or(usd_budget_nano IS NOT NULL OR token_budget IS NOT NULL), false)
           AS budgeted,
       coalesce(bool_or(budget_ms IS NOT NULL), false) AS timed,
       NOT coalesce(bool_or(budget_ms IS NOT NULL), false) AS untimed
FROM derive_runs;
-- gates: without usage, none
-- when: no_usage
SELECT false AS budgeted, coalesce(bool_or(budget_ms IS NOT NULL), false) AS timed,
       NOT coalesce(bool_or(budget_ms IS NOT NULL), false) AS untimed
FROM derive_runs;

-- 4b. The steps with their allocations. A model step neither metered nor above a metered span
-- is unmetered (docs/metrics.md §11.4), and possibly billed unless its class says the call was
-- refused or failed before it ran.
CREATE OR REPLACE TEMP TABLE derive_steps AS
SELECT s.* EXCLUDE (own_allocated_ms),
       coalesce(s.own_allocated_ms, a.allocated_ns // 1000000) AS allocated_ms,
       ((s.end_ns - s.start_ns) / 1e6)
           / nullif(coalesce(s.own_allocated_ms, a.allocated_ns / 1e6), 0) AS utilisation,
       r.agent, r.start_ns AS run_start_ns, r.budget_ms IS NOT NULL AS run_has_budget,
       s.kind = 'model' AND m.span_id IS NULL AS unmetered,
       s.kind = 'model' AND m.span_id IS NULL AND s.class IN (/*@billable_classes*/)
           AS possibly_billed
FROM derive_step_facts s
JOIN derive_runs r ON r.run_id = s.run_id
LEFT JOIN derive_step_cost m ON m.trace_id = s.trace_id AND m.span_id = s.span_id
-- docs/guide.md#declaring-budgets: a declared cap for the step's key gives a step without
-- budget.allocated_ms the allocation min(cap, B - (step start - s)), in ns (stored as whole ms,
-- rounded down; the utilisation uses it exactly), never below 0; in a run of unknown budget, the
-- cap alone.
LEFT JOIN declared_step_caps c ON c.step_key = s.step_key,
LATERAL (SELECT CASE
    WHEN c.cap_ms IS NULL THEN NULL
    WHEN r.budget_ms IS NULL THEN c.cap_ms * 1000000
    ELSE least(c.cap_ms * 1000000,
               greatest(0, r.budget_ms * 1000000 - (s.start_ns - r.start_ns))) END
    AS allocated_ns) a;

-- 5. Consumption share (docs/metrics.md §4). Top-level steps clipped to [s, e]; the distinct
-- start/end points cut [s, e] into elementary intervals; an interval of length dt with n active
-- steps gives dt/n to each. Rather than joining every step with every interval (quadratic in the
-- steps of a run), W(p) = sum of dt/n over the intervals before point p is a running sum, and a
-- step's consumption is W(its clipped end) - W(its clipped start).
-- when: timed
CREATE OR REPLACE TEMP TABLE derive_consumption AS
WITH clipped AS (
    SELECT st.trace_id, st.span_id, st.run_id, t.lifted_from,
           greatest(st.start_ns, r.start_ns) AS cs, least(st.end_ns, r.window_end_ns) AS ce
    FROM derive_steps st JOIN derive_runs r USING (run_id)
    JOIN derive_tree t ON t.trace_id = st.trace_id AND t.span_id = st.span_id
                      AND t.run_span_id = r.span_id
    WHERE st.is_top_level AND r.budget_ms IS NOT NULL
), holes AS (
    -- docs/conventions.md: a model step is not active while a tool lifted out of it runs. The union
    -- of its tools' intervals (clipped to it), as islands of overlapping intervals.
    SELECT m.run_id, m.span_id, greatest(t.cs, m.cs) AS hs, least(t.ce, m.ce) AS he
    FROM clipped t JOIN clipped m ON m.run_id = t.run_id AND m.span_id = t.lifted_from
    WHERE greatest(t.cs, m.cs) < least(t.ce, m.ce)
), hole_starts AS (
    SELECT *, coalesce(hs > max(he) OVER (PARTITION BY run_id, span_id ORDER BY hs, he
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                       true) AS starts_island
    FROM holes
), islands AS (
    SELECT run_id, span_id, min(hs) AS hs, max(he) AS he
    FROM (SELECT *, sum(starts_island::INTEGER) OVER (PARTITION BY run_id, span_id
                                                     ORDER BY hs, he) AS island
          FROM hole_starts)
    GROUP BY run_id, span_id, island
), segments AS (
    -- each top-level step's active time: its clipped interval, less its islands
    SELECT c.trace_id, c.span_id, c.run_id, c.cs, c.ce FROM clipped c
    WHERE NOT EXISTS (SELECT 1 FROM islands i WHERE i.run_id = c.run_id AND i.span_id = c.span_id)
    UNION ALL
    SELECT c.trace_id, c.span_id, c.run_id,
           coalesce(lag(i.he) OVER (PARTITION BY i.run_id, i.span_id ORDER BY i.hs), c.cs),
           i.hs
    FROM islands i JOIN clipped c ON c.run_id = i.run_id AND c.span_id = i.span_id
    UNION ALL
    SELECT c.trace_id, c.span_id, c.run_id, max(i.he), c.ce
    FROM islands i JOIN clipped c ON c.run_id = i.run_id AND c.span_id = i.span_id
    GROUP BY c.trace_id, c.span_id, c.run_id, c.ce
), edges AS (
    SELECT run_id, cs AS p, 1 AS delta FROM segments WHERE cs < ce
    UNION ALL SELECT run_id, ce, -1 FROM segments WHERE cs < ce
    UNION ALL SELECT run_id, start_ns, 0 FROM derive_runs WHERE budget_ms IS NOT NULL
    UNION ALL SELECT run_id, window_end_ns, 0 FROM derive_runs WHERE budget_ms IS NOT NULL
), points AS (
    SELECT run_id, p, sum(delta) AS delta FROM edges GROUP BY ALL
), intervals AS (
    SELECT run_id, p,
           sum(delta) OVER (PARTITION BY run_id ORDER BY p) AS active,
           lead(p) OVER (PARTITION BY run_id ORDER BY p) - p AS dt
    FROM points
), weighted AS (
    SELECT run_id, p, active, dt,
           coalesce(sum(CASE WHEN active > 0 THEN dt::DOUBLE / active END) OVER (
               PARTITION BY run_id ORDER BY p
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS w_before
    FROM intervals
), unattributed AS (
    SELECT run_id, coalesce(sum(dt) FILTER (WHERE active = 0), 0) / 1e6 AS unattributed_ms
    FROM weighted GROUP BY ALL
)
SELECT c.trace_id, c.span_id, c.run_id,
       coalesce(sum(CASE WHEN c.cs < c.ce THEN (we.w_before - ws.w_before) / 1e6 END), 0)
           AS consumption_ms,
       any_value(u.unattributed_ms) AS unattributed_ms
FROM segments c
JOIN unattributed u USING (run_id)
LEFT JOIN weighted ws ON ws.run_id = c.run_id AND ws.p = c.cs
LEFT JOIN weighted we ON we.run_id = c.run_id AND we.p = c.ce
GROUP BY c.trace_id, c.span_id, c.run_id;

-- 6. Culprit (largest consumption; ties: earliest start, then span id) and holder (the
-- top-level step active at d, i.e. started before d and not ended before d; several: the
-- latest started; none: the last one to start before the run span ended). Both are steps,
-- named with their number: the rank of their start among the run's top-level steps, from 1
-- (docs/metrics.md §4; ties: the smaller span id). `holder_at_deadline` tells the two holder cases
-- apart: only a holder active at d was running when the deadline fired.
-- when: timed
CREATE OR REPLACE TEMP TABLE derive_blame AS
WITH top AS (
    SELECT st.run_id, st.span_id, st.step_key, st.start_ns, st.end_ns, c.consumption_ms,
           r.deadline_ns, r.end_ns AS run_end_ns, r.budget_ms
    FROM derive_steps st
    JOIN derive_runs r USING (run_id)
    JOIN derive_consumption c ON c.trace_id = st.trace_id AND c.span_id = st.span_id
    WHERE st.is_top_level
), culprit AS (
    SELECT run_id, span_id AS culprit_span_id, step_key AS culprit_key,
           consumption_ms AS culprit_ms, consumption_ms / budget_ms AS culprit_share,
           start_ns AS culprit_start_ns
    FROM top
    QUALIFY row_number() OVER (PARTITION BY run_id
                               ORDER BY consumption_ms DESC, start_ns, span_id) = 1
), holder AS (
    SELECT run_id, span_id AS holder_span_id, step_key AS holder_key,
           start_ns AS holder_start_ns,
           start_ns < deadline_ns AND end_ns >= deadline_ns AS holder_at_deadline
    FROM top
    WHERE start_ns < run_end_ns OR (start_ns < deadline_ns AND end_ns >= deadline_ns)
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY
        (start_ns < deadline_ns AND end_ns >= deadline_ns) DESC, start_ns DESC, span_id) = 1
), blamed AS (
    SELECT * FROM culprit FULL JOIN holder USING (run_id)
), counted AS (
    -- the numbers: how many top-level steps start before each (a count over the run's steps,
    -- cheaper than ranking them all)
    SELECT b.run_id,
           count(*) FILTER (WHERE (t.start_ns, t.span_id)
                                  < (b.culprit_start_ns, b.culprit_span_id)) AS before_culprit,
           count(*) FILTER (WHERE (t.start_ns, t.span_id)
                                  < (b.holder_start_ns, b.holder_span_id)) AS before_holder
    FROM blamed b JOIN top t USING (run_id)
    GROUP BY b.run_id
)
SELECT b.* EXCLUDE (culprit_start_ns, holder_start_ns),
       CASE WHEN b.culprit_span_id IS NOT NULL THEN 1 + c.before_culprit END AS culprit_step,
       CASE WHEN b.holder_span_id IS NOT NULL THEN 1 + c.before_holder END AS holder_step
FROM blamed b JOIN counted c USING (run_id);

-- 5 and 6 in a turn without a time budget: no step is clipped, so neither has a row (the
-- columns as the statements above make them).
-- when: untimed
CREATE OR REPLACE TEMP TABLE derive_consumption (
    trace_id VARCHAR, span_id VARCHAR, run_id VARCHAR, consumption_ms DOUBLE,
    unattributed_ms DOUBLE
);
-- when: untimed
CREATE OR REPLACE TEMP TABLE derive_blame (
    run_id VARCHAR, culprit_span_id VARCHAR, culprit_key VARCHAR, culprit_ms DOUBLE,
    culprit_share DOUBLE, holder_span_id VARCHAR, holder_key VARCHAR,
    holder_at_deadline BOOLEAN, culprit_step BIGINT, holder_step BIGINT
);

-- 7. The finished run rows, kept apart so that the steps can copy `exhausted` without reading
-- the whole runs table back. Tokens and dollars (docs/metrics.md §11.4-§11.7): the sums of
-- derive_cost.sql (0 for a run without metered spans), its steps unmetered and possibly
-- billed, B$ and Btok with utilisation, exhaustion and overrun; the culprits and crossings
-- below, where there is a budget.
CREATE OR REPLACE TEMP TABLE derive_final_runs AS
WITH counted AS (
    SELECT run_id, count(*) AS steps, count(*) FILTER (WHERE is_top_level) AS top_level_steps,
           count(*) FILTER (WHERE class = 'refused') AS refused_steps,
           -- §4's time exhaustion reads the refused steps whose refusal names time; §11.5
           -- the refusals naming the other budgets
           count(*) FILTER (WHERE class = 'refused' AND refused_by = 'time')
               AS time_refused_steps,
           coalesce(bool_or(class = 'refused' AND refused_by = 'usd'), false) AS refused_usd,
           coalesce(bool_or(class = 'refused' AND refused_by = 'tokens'), false)
               AS refused_tokens,
           count(*) FILTER (WHERE unmetered) AS unmetered_steps,
           count(*) FILTER (WHERE possibly_billed) AS unmetered_billable_steps
    FROM derive_steps GROUP BY ALL
), measured AS (
    SELECT r.*,
           coalesce(lower(trim(r.outcome)) IN ('exhausted', 'partial'), false)
               AS stated_exhausted,
           coalesce(n.steps, 0) AS steps, coalesce(n.top_level_steps, 0) AS top_level_steps,
           coalesce(n.refused_steps, 0) AS refused_steps,
           coalesce(n.time_refused_steps, 0) AS time_refused_steps,
           coalesce(n.refused_usd, false) AS refused_usd,
           coalesce(n.refused_tokens, false) AS refused_tokens,
           coalesce(n.unmetered_steps, 0) AS unmetered_steps,
           coalesce(n.unmetered_billable_steps, 0) AS unmetered_billable_steps,
           coalesce(k.tokens, 0) AS tokens, coalesce(k.input_tokens, 0) AS input_tokens,
           coalesce(k.cache_read_tokens, 0) AS cache_read_tokens,
           coalesce(k.cache_write_tokens, 0) AS cache_write_tokens,
           coalesce(k.output_tokens, 0) AS output_tokens,
           coalesce(k.reasoning_tokens, 0) AS reasoning_tokens,
           coalesce(k.cost_nano, 0) AS cost_nano,
           coalesce(k.unpriced_spans, 0) AS unpriced_spans,
           coalesce(k.unpriced_steps, 0) AS unpriced_steps,
           coalesce(k.unpriced_models, []) AS unpriced_models,
           coalesce(k.unattributed_cost_nano, 0) AS unattributed_cost_nano,
           coalesce(k.unattributed_tokens, 0) AS unattributed_tokens,
           k.reported_total_nano
    FROM derive_runs r
    LEFT JOIN counted n USING (run_id)
    LEFT JOIN derive_run_cost k USING (run_id)
)
SELECT r.run_id, r.trace_id, r.span_id, r.agent, r.start_ns, r.end_ns, r.budget_ms,
       r.budget_source, r.deadline_ns, r.window_end_ns, r.reserve_ms, r.outcome, r.elapsed_ms, r.utilisation,
       r.latest_end_ns, r.overrun_ms,
       -- docs/metrics.md §4: a stated outcome decides (a value outside the list of §2 counts
       -- as absent), unless it names another budget than time (budget.run.exhausted_by); otherwise
       -- running to the deadline, or a step refused by time.
       CASE WHEN r.budget_ms IS NULL THEN NULL
            WHEN r.known_outcome IN (/*@run_outcomes*/)
                THEN r.known_outcome IN ('exhausted', 'partial')
                     AND coalesce(r.exhausted_by, 'time') = 'time'
            ELSE r.latest_end_ns >= r.deadline_ns OR r.time_refused_steps > 0
       END AS exhausted,
       r.refused_steps, r.steps, r.top_level_steps,
       CASE WHEN r.budget_ms IS NOT NULL
            THEN coalesce(u.unattributed_ms, (r.window_end_ns - r.start_ns) / 1e6) END
           AS unattributed_ms,
       b.culprit_span_id, b.culprit_key, b.culprit_ms, b.culprit_share,
       b.holder_span_id, b.holder_key, r.week,
       b.culprit_step, b.holder_step, b.holder_at_deadline, r.root_missing,
       r.tokens, r.input_tokens, r.cache_read_tokens, r.cache_write_tokens, r.output_tokens,
       r.reasoning_tokens, r.cost_nano,
       r.unpriced_spans = 0 AND r.unmetered_billable_steps = 0 AS cost_complete,
       r.unpriced_steps, r.unmetered_steps, r.unmetered_billable_steps, r.unpriced_models,
       r.unattributed_cost_nano, r.unattributed_tokens, r.reported_total_nano,
       r.exhausted_by,
       r.usd_budget_nano, r.usd_budget_source, r.token_budget, r.token_budget_source,
       r.cost_nano / nullif(r.usd_budget_nano, 0) AS cost_utilisation,
       r.tokens / nullif(r.token_budget, 0) AS token_utilisation,
       -- §11.5: a stated outcome naming the budget, spending it, or a refusal naming it; a
       -- run exhausted so counts even when its budget is unknown (enforced elsewhere)
       CASE WHEN r.usd_budget_nano IS NOT NULL
                THEN (r.stated_exhausted AND coalesce(r.exhausted_by = 'usd', false))
                     OR r.cost_nano >= r.usd_budget_nano OR r.refused_usd
            WHEN (r.stated_exhausted AND coalesce(r.exhausted_by = 'usd', false))
                 OR r.refused_usd THEN true
       END AS usd_exhausted,
       CASE WHEN r.token_budget IS NOT NULL
                THEN (r.stated_exhausted AND coalesce(r.exhausted_by = 'tokens', false))
                     OR r.tokens >= r.token_budget OR r.refused_tokens
            WHEN (r.stated_exhausted AND coalesce(r.exhausted_by = 'tokens', false))
                 OR r.refused_tokens THEN true
       END AS tokens_exhausted,
       -- the culprits and the crossings: set below, where there is a budget and usage
       NULL::VARCHAR AS cost_culprit_span_id, NULL::VARCHAR AS cost_culprit_key,
       NULL::INTEGER AS cost_culprit_step, NULL::BIGINT AS cost_culprit_nano,
       NULL::DOUBLE AS cost_culprit_share,
       NULL::VARCHAR AS cost_crosser_span_id, NULL::VARCHAR AS cost_crosser_key,
       NULL::INTEGER AS cost_crosser_step,
       NULL::BIGINT AS cost_before_crossing_nano, NULL::BIGINT AS cost_after_crossing_nano,
       CASE WHEN r.usd_budget_nano IS NOT NULL
            THEN greatest(0, r.cost_nano - r.usd_budget_nano) END AS overrun_usd_nano,
       NULL::VARCHAR AS token_culprit_span_id, NULL::VARCHAR AS token_culprit_key,
       NULL::INTEGER AS token_culprit_step, NULL::BIGINT AS token_culprit_tokens,
       NULL::DOUBLE AS token_culprit_share,
       NULL::VARCHAR AS token_crosser_span_id, NULL::VARCHAR AS token_crosser_key,
       NULL::INTEGER AS token_crosser_step,
       NULL::BIGINT AS tokens_before_crossing, NULL::BIGINT AS tokens_after_crossing,
       CASE WHEN r.token_budget IS NOT NULL
            THEN greatest(0, r.tokens - r.token_budget) END AS overrun_tokens
FROM measured r
LEFT JOIN (SELECT DISTINCT run_id, unattributed_ms FROM derive_consumption) u USING (run_id)
LEFT JOIN derive_blame b USING (run_id);

-- Where each run with a budget crossed it (§11.6): its metered spans by end, start, span id (a
-- call's bill is known when it completes); the first at which the cumulative known cost, or
-- token count, reaches the budget, the top-level step it belongs to, and the spend before and
-- after it. The cost and token culprits (the top-level step with the largest consumption;
-- ties: the earliest start; only one that consumed more than 0) and the steps the runs name,
-- numbered as §4 numbers them (the rank of their start among the run's top-level steps, from
-- 1; ties: the smaller span id).
-- when: budgeted
UPDATE derive_final_runs SET
    cost_crosser_span_id = n.usd.step, token_crosser_span_id = n.tokens.step,
    cost_before_crossing_nano = CAST(CASE WHEN n.usd."before" > 9223372036854775807
                                          THEN 9223372036854775807
                                          ELSE n.usd."before" END AS BIGINT),
    cost_after_crossing_nano = CAST(CASE WHEN n.usd."after" > 9223372036854775807
                                         THEN 9223372036854775807
                                         ELSE n.usd."after" END AS BIGINT),
    tokens_before_crossing = n.tokens."before"::BIGINT,
    tokens_after_crossing = n.tokens."after"::BIGINT,
    cost_culprit_span_id = n.cost_culprit.span_id, cost_culprit_key = n.cost_culprit.key,
    cost_culprit_nano = n.cost_culprit.spent,
    cost_culprit_share = n.cost_culprit.spent / nullif(derive_final_runs.usd_budget_nano, 0),
    token_culprit_span_id = n.token_culprit.span_id, token_culprit_key = n.token_culprit.key,
    token_culprit_tokens = n.token_culprit.spent,
    token_culprit_share = n.token_culprit.spent / nullif(derive_final_runs.token_budget, 0),
    cost_culprit_step = CASE WHEN n.cost_culprit IS NOT NULL THEN 1 + n.before_cost_culprit END,
    token_culprit_step = CASE WHEN n.token_culprit IS NOT NULL
                              THEN 1 + n.before_token_culprit END,
    cost_crosser_step = CASE WHEN n.usd_start IS NOT NULL THEN 1 + n.before_cost_crosser END,
    token_crosser_step = CASE WHEN n.token_start IS NOT NULL
                              THEN 1 + n.before_token_crosser END,
    cost_crosser_key = n.cost_crosser_key, token_crosser_key = n.token_crosser_key
FROM (
    WITH budgeted AS (
        SELECT run_id, usd_budget_nano, token_budget FROM derive_final_runs
        WHERE usd_budget_nano IS NOT NULL OR token_budget IS NOT NULL
    ), crossing AS (
        SELECT run_id,
               arg_min({'step': top_step_id, 'before': cost_through - known,
                        'after': cost_through}, position)
                   FILTER (WHERE cost_through >= usd_budget_nano) AS usd,
               arg_min({'step': top_step_id, 'before': tokens_through - tokens,
                        'after': tokens_through}, position)
                   FILTER (WHERE tokens_through >= token_budget) AS tokens
        FROM (SELECT m.run_id, m.top_step_id, m.tokens, coalesce(m.cost_nano, 0) AS known,
                     b.usd_budget_nano, b.token_budget,
                     sum(coalesce(m.cost_nano, 0)) OVER spent AS cost_through,
                     sum(m.tokens) OVER spent AS tokens_through,
                     (m.end_ns, m.start_ns, m.span_id) AS position
              FROM derive_costed m
              JOIN budgeted b ON b.run_id = m.run_id
              WHERE m.is_metered
              WINDOW spent AS (PARTITION BY m.run_id ORDER BY m.end_ns, m.start_ns, m.span_id
                               ROWS UNBOUNDED PRECEDING))
        GROUP BY run_id
    ), top AS (
        SELECT s.run_id, s.span_id, s.step_key, s.start_ns,
               coalesce(c.consumption_usd_nano, 0) AS consumption_usd_nano,
               coalesce(c.consumption_tokens, 0) AS consumption_tokens
        FROM derive_steps s
        SEMI JOIN budgeted b ON b.run_id = s.run_id
        LEFT JOIN derive_step_cost c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
        WHERE s.is_top_level
    ), named AS (
        SELECT b.run_id, x.usd, x.tokens, x.usd.step AS usd_step, x.tokens.step AS token_step,
               arg_min({'span_id': s.span_id, 'key': s.step_key, 'start_ns': s.start_ns,
                        'spent': s.consumption_usd_nano},
                       (-s.consumption_usd_nano, s.start_ns, s.span_id))
                   FILTER (WHERE s.consumption_usd_nano > 0 AND b.usd_budget_nano IS NOT NULL)
                   AS cost_culprit,
               arg_min({'span_id': s.span_id, 'key': s.step_key, 'start_ns': s.start_ns,
                        'spent': s.consumption_tokens},
                       (-s.consumption_tokens, s.start_ns, s.span_id))
                   FILTER (WHERE s.consumption_tokens > 0 AND b.token_budget IS NOT NULL)
                   AS token_culprit,
               any_value(s.step_key) FILTER (WHERE s.span_id = x.usd.step) AS cost_crosser_key,
               any_value(s.start_ns) FILTER (WHERE s.span_id = x.usd.step) AS usd_start,
               any_value(s.step_key) FILTER (WHERE s.span_id = x.tokens.step)
                   AS token_crosser_key,
               any_value(s.start_ns) FILTER (WHERE s.span_id = x.tokens.step) AS token_start
        FROM budgeted b
        LEFT JOIN top s ON s.run_id = b.run_id
        LEFT JOIN crossing x ON x.run_id = b.run_id
        GROUP BY b.run_id, x.usd, x.tokens
    )
    SELECT c.*,
           count(*) FILTER (WHERE (t.start_ns, t.span_id)
                            < (c.cost_culprit.start_ns, c.cost_culprit.span_id))
               AS before_cost_culprit,
           count(*) FILTER (WHERE (t.start_ns, t.span_id)
                            < (c.token_culprit.start_ns, c.token_culprit.span_id))
               AS before_token_culprit,
           count(*) FILTER (WHERE (t.start_ns, t.span_id) < (c.usd_start, c.usd_step))
               AS before_cost_crosser,
           count(*) FILTER (WHERE (t.start_ns, t.span_id) < (c.token_start, c.token_step))
               AS before_token_crosser
    FROM named c
    LEFT JOIN top t ON t.run_id = c.run_id
    GROUP BY ALL
) n
WHERE n.run_id = derive_final_runs.run_id;

-- 8. Replace the touched traces' rows (those of traces derived before: derive_refresh.sql's
-- gate `seen_before`; after derive_budgets.sql, always).
-- when: seen_before
DELETE FROM steps WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
-- when: seen_before
DELETE FROM runs WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);

INSERT INTO runs BY NAME SELECT * FROM derive_final_runs;

-- when: seen_before
DELETE FROM reconcile_links WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
INSERT INTO reconcile_links BY NAME
SELECT trace_id, span_id, run_id, target.trace_id AS target_trace_id,
       target.span_id AS target_span_id, idempotency_key,
       coalesce(reconcile_result, 'unknown') AS result, start_ns, end_ns
FROM (SELECT *, unnest(link_targets) AS target FROM derive_steps
      WHERE kind = 'reconcile' AND len(link_targets) > 0);

INSERT INTO steps BY NAME
SELECT st.*, c.consumption_ms, r.exhausted AS run_exhausted,
       -- tokens and dollars (docs/metrics.md §11.4, §11.6): a step's sums, and a top-level
       -- step's own consumption and share of B$ and Btok (not clipped); its cost is complete
       -- when no metered span under it is unpriced, it is not possibly billed, and (a
       -- top-level step) no step in it is
       k.input_tokens, k.cache_read_tokens, k.cache_write_tokens, k.output_tokens,
       k.reasoning_tokens, k.tokens, k.cost_nano, k.cost_source,
       CASE WHEN st.is_top_level THEN coalesce(k.consumption_usd_nano, 0) END
           AS consumption_usd_nano,
       CASE WHEN st.is_top_level THEN coalesce(k.consumption_tokens, 0) END
           AS consumption_tokens,
       coalesce(k.unpriced_under, 0) = 0 AND NOT st.possibly_billed
           AND NOT (st.is_top_level AND t.top_step_id IS NOT NULL) AS cost_complete,
       CASE WHEN st.is_top_level THEN coalesce(k.consumption_usd_nano, 0) END
           / nullif(r.usd_budget_nano, 0) AS cost_share,
       CASE WHEN st.is_top_level THEN coalesce(k.consumption_tokens, 0) END
           / nullif(r.token_budget, 0) AS token_share
FROM derive_steps st
JOIN derive_final_runs r USING (run_id)
LEFT JOIN derive_consumption c ON c.trace_id = st.trace_id AND c.span_id = st.span_id
LEFT JOIN derive_step_cost k ON k.trace_id = st.trace_id AND k.span_id = st.span_id
LEFT JOIN (SELECT DISTINCT trace_id, top_step_id FROM derive_steps WHERE possibly_billed) t
       ON t.trace_id = st.trace_id AND t.top_step_id = st.span_id;

DROP TABLE derive_final_runs;
DROP TABLE derive_blame;
DROP TABLE derive_consumption;
DROP TABLE derive_steps;
DROP TABLE derive_step_facts;
DROP TABLE derive_tree;
DROP TABLE derive_runs;
DROP TABLE derive_run_facts;
DROP TABLE derive_seen_before;
-- what derive_cost.sql left (the view and the pairs' prices only where there was usage)
-- when: usage
DROP VIEW derive_costed;
-- when: usage
DROP TABLE derive_costs;
-- when: usage
DROP TABLE derive_pair_prices;
-- when: usage
DROP TABLE derive_span_prices;
DROP TABLE derive_step_cost;
DROP TABLE derive_run_cost;
DROP TABLE derive_metered;
