-- name: derive_measure
-- Consumption, blame and the finished runs and steps; then the live tables are replaced (as store/derive/sql/derive_measure.sql).
--
-- Reads budgetscope_tmp_runs and budgetscope_tmp_steps (derive_budgeted.sql) and
-- budgetscope_tmp_tree (derive_steps.sql, or a re-measure's derive_remeasure.sql): the last file
-- of a build and of a re-measure (store.clickhouse.DERIVE_BUILD, DERIVE_REMEASURE).

-- 5. Consumption share (docs/metrics.md §4), as derive_refresh.sql step 5: W(p) = sum of dt/n over
-- the elementary intervals before point p, and a step's consumption is W(end) - W(start).
-- The clipped intervals and the weighted points are tables, not CTEs: ClickHouse evaluates a
-- CTE again at each reference, and each is read three times (1,043,960 spans of
-- bench/bench_clickhouse.py, busy 2-core machine: this step 23.0 s as CTEs, 14.3 s as tables).
CREATE TABLE budgetscope_tmp_clipped ENGINE = Memory SETTINGS compress = 1 AS
SELECT st.trace_id AS trace_id, st.span_id AS span_id, st.run_id AS run_id,
       t.lifted_from AS lifted_from,
       greatest(st.start_ns, r.start_ns) AS cs, least(st.end_ns, r.window_end_ns) AS ce
FROM budgetscope_tmp_steps st JOIN budgetscope_tmp_runs r ON r.run_id = st.run_id
JOIN budgetscope_tmp_tree t ON t.trace_id = st.trace_id AND t.span_id = st.span_id
                           AND t.run_span_id = r.span_id
WHERE st.is_top_level AND r.budget_ms IS NOT NULL;

-- Each top-level step's active time: its clipped interval less the union of the intervals of
-- the tools lifted out of it (docs/conventions.md: a model step is not active while its tool runs).
CREATE TABLE budgetscope_tmp_segments ENGINE = Memory SETTINGS compress = 1 AS
WITH holes AS (
    SELECT m.run_id AS run_id, m.span_id AS span_id, greatest(t.cs, m.cs) AS hs,
           least(t.ce, m.ce) AS he
    FROM budgetscope_tmp_clipped t
    JOIN budgetscope_tmp_clipped m ON m.run_id = t.run_id AND m.span_id = t.lifted_from
    WHERE greatest(t.cs, m.cs) < least(t.ce, m.ce)
), hole_starts AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, span_id ORDER BY hs, he) = 1
              OR hs > max(he) OVER (PARTITION BY run_id, span_id ORDER BY hs, he
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
              AS starts_island
    FROM holes
), islands AS (
    SELECT run_id, span_id, min(hs) AS hs, max(he) AS he
    FROM (SELECT *, sum(toInt64(starts_island)) OVER (PARTITION BY run_id, span_id
                                                     ORDER BY hs, he) AS island
          FROM hole_starts)
    GROUP BY run_id, span_id, island
), islanded AS (
    SELECT i.run_id AS run_id, i.span_id AS span_id, i.hs AS hs, i.he AS he,
           c.trace_id AS trace_id, c.cs AS cs, c.ce AS ce
    FROM islands i JOIN budgetscope_tmp_clipped c ON c.run_id = i.run_id AND c.span_id = i.span_id
)
SELECT trace_id, span_id, run_id, cs, ce FROM budgetscope_tmp_clipped
WHERE (run_id, span_id) NOT IN (SELECT run_id, span_id FROM islands)
UNION ALL
SELECT trace_id, span_id, run_id,
       coalesce(lagInFrame(toNullable(he), 1, NULL) OVER (
           PARTITION BY run_id, span_id ORDER BY hs
           ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), cs) AS cs,
       hs AS ce
FROM islanded
UNION ALL
SELECT trace_id, span_id, run_id, max(he) AS cs, any(ce) AS ce
FROM islanded GROUP BY trace_id, span_id, run_id;

CREATE TABLE budgetscope_tmp_weighted ENGINE = Memory SETTINGS compress = 1 AS
WITH edges AS (
    SELECT run_id, cs AS p, 1 AS delta FROM budgetscope_tmp_segments WHERE cs < ce
    UNION ALL SELECT run_id, ce AS p, -1 AS delta FROM budgetscope_tmp_segments WHERE cs < ce
    UNION ALL SELECT run_id, start_ns AS p, 0 AS delta FROM budgetscope_tmp_runs
              WHERE budget_ms IS NOT NULL
    UNION ALL SELECT run_id, assumeNotNull(window_end_ns) AS p, 0 AS delta
              FROM budgetscope_tmp_runs WHERE budget_ms IS NOT NULL
), points AS (
    SELECT run_id, p, sum(delta) AS delta FROM edges GROUP BY run_id, p
), intervals AS (
    SELECT run_id, p,
           sum(delta) OVER (PARTITION BY run_id ORDER BY p) AS active,
           leadInFrame(toNullable(p), 1, NULL) OVER (
               PARTITION BY run_id ORDER BY p
               ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) - p AS dt
    FROM points
)
SELECT run_id, p, active, dt,
       coalesce(sum(if(active > 0, toFloat64(dt) / active, NULL)) OVER (
           PARTITION BY run_id ORDER BY p
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS w_before
FROM intervals;

CREATE TABLE budgetscope_tmp_consumption ENGINE = Memory SETTINGS compress = 1 AS
WITH unattributed AS (
    SELECT run_id, coalesce(sumIf(dt, active = 0), 0) / 1e6 AS unattributed_ms
    FROM budgetscope_tmp_weighted GROUP BY run_id
)
SELECT c.trace_id AS trace_id, c.span_id AS span_id, c.run_id AS run_id,
       coalesce(sum(if(c.cs < c.ce, (we.w_before - ws.w_before) / 1e6, NULL)), 0)
           AS consumption_ms,
       any(u.unattributed_ms) AS unattributed_ms
FROM budgetscope_tmp_segments c
JOIN unattributed u ON u.run_id = c.run_id
LEFT JOIN budgetscope_tmp_weighted ws ON ws.run_id = c.run_id AND ws.p = c.cs
LEFT JOIN budgetscope_tmp_weighted we ON we.run_id = c.run_id AND we.p = c.ce
GROUP BY c.trace_id, c.span_id, c.run_id;

-- 6. Culprit (largest consumption; ties: earliest start, then span id) and holder (the
-- top-level step active at d; several: the latest started; none: the last one to start before
-- the run span ended).
CREATE TABLE budgetscope_tmp_top ENGINE = Memory SETTINGS compress = 1 AS
SELECT st.run_id AS run_id, st.span_id AS span_id, st.step_key AS step_key,
       st.start_ns AS start_ns, st.end_ns AS end_ns, c.consumption_ms AS consumption_ms,
       r.deadline_ns AS deadline_ns, r.end_ns AS run_end_ns, r.budget_ms AS budget_ms,
       st.step_number AS step_number
FROM (SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY start_ns, span_id) AS step_number
      FROM budgetscope_tmp_steps WHERE is_top_level) st
JOIN budgetscope_tmp_runs r ON r.run_id = st.run_id
JOIN budgetscope_tmp_consumption c ON c.trace_id = st.trace_id AND c.span_id = st.span_id;

-- Culprit and holder are steps, named with their number (docs/metrics.md §4, as
-- derive_measure.sql).
CREATE TABLE budgetscope_tmp_blame ENGINE = Memory SETTINGS compress = 1 AS
WITH culprit AS (
    SELECT run_id, span_id AS culprit_span_id, step_key AS culprit_key,
           consumption_ms AS culprit_ms, consumption_ms / budget_ms AS culprit_share,
           toInt32(step_number) AS culprit_step
    FROM budgetscope_tmp_top
    QUALIFY row_number() OVER (PARTITION BY run_id
                               ORDER BY consumption_ms DESC, start_ns, span_id) = 1
), holder AS (
    SELECT run_id, span_id AS holder_span_id, step_key AS holder_key,
           toInt32(step_number) AS holder_step,
           start_ns < deadline_ns AND end_ns >= deadline_ns AS holder_at_deadline
    FROM budgetscope_tmp_top
    WHERE start_ns < run_end_ns OR (start_ns < deadline_ns AND end_ns >= deadline_ns)
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY
        (start_ns < deadline_ns AND end_ns >= deadline_ns) DESC, start_ns DESC, span_id) = 1
)
SELECT coalesce(c.run_id, h.run_id) AS run_id, c.culprit_span_id AS culprit_span_id,
       c.culprit_key AS culprit_key, c.culprit_ms AS culprit_ms,
       c.culprit_share AS culprit_share, h.holder_span_id AS holder_span_id,
       h.holder_key AS holder_key, c.culprit_step AS culprit_step,
       h.holder_step AS holder_step,
       CAST(h.holder_at_deadline, 'Nullable(Bool)') AS holder_at_deadline
FROM culprit c FULL JOIN holder h ON h.run_id = c.run_id;

-- 7. The finished run rows.
CREATE TABLE budgetscope_runs_next ENGINE = MergeTree ORDER BY run_id AS
SELECT r.run_id AS run_id, r.trace_id AS trace_id, r.span_id AS span_id, r.agent AS agent,
       r.start_ns AS start_ns, r.end_ns AS end_ns, r.budget_ms AS budget_ms,
       r.budget_source AS budget_source,
       r.deadline_ns AS deadline_ns, r.window_end_ns AS window_end_ns,
       r.reserve_ms AS reserve_ms, r.outcome AS outcome, r.elapsed_ms AS elapsed_ms,
       r.utilisation AS utilisation, r.latest_end_ns AS latest_end_ns,
       r.overrun_ms AS overrun_ms,
       -- docs/metrics.md §4: a stated outcome decides (a value outside the list of §2 counts as
       -- absent), unless it names another budget than time (budget.run.exhausted_by); otherwise
       -- running to the deadline, or a step refused by time (derive_cost.sql counts them).
       CAST(multiIf(r.budget_ms IS NULL, NULL,
               r.known_outcome IN (/*@run_outcomes*/),
                   r.known_outcome IN ('exhausted', 'partial')
                   AND coalesce(k.exhausted_by, 'time') = 'time',
               r.latest_end_ns >= r.deadline_ns OR coalesce(k.time_refused_steps, 0) > 0),
            'Nullable(Bool)') AS exhausted,
       toInt64(coalesce(n.refused_steps, 0)) AS refused_steps,
       toInt64(coalesce(n.steps, 0)) AS steps,
       toInt64(coalesce(n.top_level_steps, 0)) AS top_level_steps,
       if(r.budget_ms IS NOT NULL,
          coalesce(u.unattributed_ms, (r.window_end_ns - r.start_ns) / 1e6), NULL)
           AS unattributed_ms,
       b.culprit_span_id AS culprit_span_id, b.culprit_key AS culprit_key,
       b.culprit_ms AS culprit_ms, b.culprit_share AS culprit_share,
       b.holder_span_id AS holder_span_id, b.holder_key AS holder_key, r.week AS week,
       b.culprit_step AS culprit_step, b.holder_step AS holder_step,
       b.holder_at_deadline AS holder_at_deadline, CAST(r.root_missing, 'Bool') AS root_missing,
       -- tokens and dollars (docs/metrics.md §11, derive_cost.sql)
       k.tokens AS tokens, k.input_tokens AS input_tokens,
       k.cache_read_tokens AS cache_read_tokens,
       k.cache_write_tokens AS cache_write_tokens, k.output_tokens AS output_tokens,
       k.reasoning_tokens AS reasoning_tokens, k.cost_nano AS cost_nano,
       k.cost_complete AS cost_complete, k.unpriced_steps AS unpriced_steps,
       k.unmetered_steps AS unmetered_steps,
       k.unmetered_billable_steps AS unmetered_billable_steps,
       k.unpriced_models AS unpriced_models,
       k.unattributed_cost_nano AS unattributed_cost_nano,
       k.unattributed_tokens AS unattributed_tokens,
       k.reported_total_nano AS reported_total_nano, k.exhausted_by AS exhausted_by,
       k.usd_budget_nano AS usd_budget_nano, k.usd_budget_source AS usd_budget_source,
       k.token_budget AS token_budget, k.token_budget_source AS token_budget_source,
       k.cost_utilisation AS cost_utilisation, k.token_utilisation AS token_utilisation,
       k.usd_exhausted AS usd_exhausted, k.tokens_exhausted AS tokens_exhausted,
       k.cost_culprit_span_id AS cost_culprit_span_id,
       k.cost_culprit_key AS cost_culprit_key, k.cost_culprit_step AS cost_culprit_step,
       k.cost_culprit_nano AS cost_culprit_nano,
       k.cost_culprit_share AS cost_culprit_share,
       k.cost_crosser_span_id AS cost_crosser_span_id,
       k.cost_crosser_key AS cost_crosser_key, k.cost_crosser_step AS cost_crosser_step,
       k.cost_before_crossing_nano AS cost_before_crossing_nano,
       k.cost_after_crossing_nano AS cost_after_crossing_nano,
       k.overrun_usd_nano AS overrun_usd_nano,
       k.token_culprit_span_id AS token_culprit_span_id,
       k.token_culprit_key AS token_culprit_key,
       k.token_culprit_step AS token_culprit_step,
       k.token_culprit_tokens AS token_culprit_tokens,
       k.token_culprit_share AS token_culprit_share,
       k.token_crosser_span_id AS token_crosser_span_id,
       k.token_crosser_key AS token_crosser_key,
       k.token_crosser_step AS token_crosser_step,
       k.tokens_before_crossing AS tokens_before_crossing,
       k.tokens_after_crossing AS tokens_after_crossing,
       k.overrun_tokens AS overrun_tokens
FROM budgetscope_tmp_runs r
LEFT JOIN (SELECT run_id, count() AS steps, countIf(is_top_level) AS top_level_steps,
                  countIf(class = 'refused') AS refused_steps
           FROM budgetscope_tmp_steps GROUP BY run_id) n ON n.run_id = r.run_id
LEFT JOIN (SELECT DISTINCT run_id, unattributed_ms FROM budgetscope_tmp_consumption) u
    ON u.run_id = r.run_id
LEFT JOIN budgetscope_tmp_blame b ON b.run_id = r.run_id
LEFT JOIN budgetscope_tmp_cost_runs k ON k.run_id = r.run_id;

-- 8. The steps with their consumption and their run's exhaustion, and the links of reconcile
-- steps (one row per link).
CREATE TABLE budgetscope_steps_next ENGINE = MergeTree ORDER BY (run_id, span_id) AS
SELECT st.run_id AS run_id, st.trace_id AS trace_id, st.span_id AS span_id,
       st.parent_span_id AS parent_span_id, st.top_step_id AS top_step_id,
       st.is_top_level AS is_top_level, st.step_level AS step_level,
       st.span_name AS span_name, st.kind AS kind, st.name AS name, st.step_key AS step_key,
       st.convention AS convention,
       st.class AS class, st.start_ns AS start_ns, st.end_ns AS end_ns,
       st.duration_ms AS duration_ms, st.remaining_ms AS remaining_ms, st.cap_ms AS cap_ms,
       st.allocated_ms AS allocated_ms, st.utilisation AS utilisation,
       st.side_effect AS side_effect, st.effect_status AS effect_status,
       st.idempotency_key AS idempotency_key, st.attempt AS attempt, st.hedge AS hedge,
       st.reconcile_result AS reconcile_result, st.cleanup_ms AS cleanup_ms,
       st.is_write AS is_write, st.is_uncertain AS is_uncertain,
       st.link_targets AS link_targets, st.agent AS agent, st.run_start_ns AS run_start_ns,
       st.run_has_budget AS run_has_budget, st.week AS week,
       c.consumption_ms AS consumption_ms, r.exhausted AS run_exhausted,
       -- tokens and dollars (docs/metrics.md §11, derive_cost.sql)
       k.input_tokens AS input_tokens, k.cache_read_tokens AS cache_read_tokens,
       k.cache_write_tokens AS cache_write_tokens, k.output_tokens AS output_tokens,
       k.reasoning_tokens AS reasoning_tokens, k.tokens AS tokens,
       k.cost_nano AS cost_nano, k.cost_complete AS cost_complete,
       k.cost_source AS cost_source, k.unmetered AS unmetered,
       k.possibly_billed AS possibly_billed, st.refused_by AS refused_by,
       k.consumption_usd_nano AS consumption_usd_nano,
       k.consumption_tokens AS consumption_tokens, k.cost_share AS cost_share,
       k.token_share AS token_share
FROM budgetscope_tmp_steps st
JOIN budgetscope_runs_next r ON r.run_id = st.run_id
LEFT JOIN budgetscope_tmp_consumption c ON c.trace_id = st.trace_id AND c.span_id = st.span_id
LEFT JOIN budgetscope_tmp_cost_steps k ON k.trace_id = st.trace_id AND k.span_id = st.span_id;

CREATE TABLE budgetscope_reconcile_links_next ENGINE = MergeTree
ORDER BY (target_trace_id, target_span_id) AS
SELECT trace_id, span_id, run_id, target.1 AS target_trace_id, target.2 AS target_span_id,
       idempotency_key, coalesce(reconcile_result, 'unknown') AS result, start_ns, end_ns
FROM budgetscope_tmp_steps
ARRAY JOIN link_targets AS target
WHERE kind = 'reconcile';

-- 9. Replace the live tables (each exchange is atomic; created empty the first time).
CREATE TABLE IF NOT EXISTS budgetscope_runs AS budgetscope_runs_next;
CREATE TABLE IF NOT EXISTS budgetscope_steps AS budgetscope_steps_next;
CREATE TABLE IF NOT EXISTS budgetscope_reconcile_links AS budgetscope_reconcile_links_next;
CREATE TABLE IF NOT EXISTS budgetscope_derive_state AS budgetscope_derive_state_next;
CREATE TABLE IF NOT EXISTS budgetscope_metered_spans AS budgetscope_metered_spans_next;
CREATE TABLE IF NOT EXISTS budgetscope_derivation_notes AS budgetscope_derivation_notes_next;
CREATE TABLE IF NOT EXISTS budgetscope_own_budgets AS budgetscope_own_budgets_next;
CREATE TABLE IF NOT EXISTS budgetscope_step_lifts AS budgetscope_step_lifts_next;
EXCHANGE TABLES budgetscope_runs AND budgetscope_runs_next;
EXCHANGE TABLES budgetscope_steps AND budgetscope_steps_next;
EXCHANGE TABLES budgetscope_reconcile_links AND budgetscope_reconcile_links_next;
EXCHANGE TABLES budgetscope_metered_spans AND budgetscope_metered_spans_next;
EXCHANGE TABLES budgetscope_derivation_notes AND budgetscope_derivation_notes_next;
EXCHANGE TABLES budgetscope_own_budgets AND budgetscope_own_budgets_next;
EXCHANGE TABLES budgetscope_step_lifts AND budgetscope_step_lifts_next;
EXCHANGE TABLES budgetscope_derive_state AND budgetscope_derive_state_next;

-- 10. Write steps with what is known about them having been read back: the DuckDB schema's
-- reconciliations and write_steps views. A table here, built with the others: a full build
-- sees every trace, so a link from another trace is resolved whatever order traces arrived in,
-- and the reconciliation and weekly reports read it instead of joining at every query.
DROP TABLE IF EXISTS budgetscope_write_steps_next;
CREATE TABLE budgetscope_write_steps_next ENGINE = MergeTree ORDER BY (run_id, span_id) AS
WITH reconcile_steps AS (
    SELECT run_id, trace_id, span_id, idempotency_key, start_ns, end_ns,
           coalesce(reconcile_result, 'unknown') AS result
    FROM budgetscope_steps WHERE kind = 'reconcile'
), reconciliations AS (
    SELECT DISTINCT * FROM (
        SELECT w.trace_id AS write_trace_id, w.span_id AS write_span_id,
               r.trace_id AS reconcile_trace_id, r.span_id AS reconcile_span_id,
               r.result AS result, r.start_ns AS start_ns, r.end_ns AS end_ns,
               r.idempotency_key AS idempotency_key
        FROM budgetscope_steps w JOIN reconcile_steps r
          ON r.run_id = w.run_id AND r.idempotency_key = w.idempotency_key
        WHERE w.is_write
        UNION ALL
        SELECT w.trace_id, w.span_id, r.trace_id, r.span_id, r.result, r.start_ns, r.end_ns,
               r.idempotency_key
        FROM budgetscope_reconcile_links r
        JOIN budgetscope_steps w ON w.trace_id = r.target_trace_id AND w.span_id = r.target_span_id
        WHERE w.is_write)
), per_write AS (
    SELECT write_trace_id, write_span_id, count() AS reconciliations,
           argMax(result, tuple(start_ns, end_ns, reconcile_span_id)) AS last_result
    FROM reconciliations GROUP BY write_trace_id, write_span_id
)
SELECT w.*,
       coalesce(p.reconciliations, 0) AS reconciliations,
       CAST(p.reconciliations IS NOT NULL, 'Bool') AS reconciled,
       CAST(w.is_uncertain AND p.reconciliations IS NULL, 'Bool') AS orphan,
       p.last_result AS last_result
FROM budgetscope_steps w
LEFT JOIN per_write p ON p.write_trace_id = w.trace_id AND p.write_span_id = w.span_id
WHERE w.is_write;
CREATE TABLE IF NOT EXISTS budgetscope_write_steps AS budgetscope_write_steps_next;
EXCHANGE TABLES budgetscope_write_steps AND budgetscope_write_steps_next;
DROP TABLE IF EXISTS budgetscope_write_steps_next;
