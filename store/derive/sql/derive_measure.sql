-- name: derive_measure
-- Everything of the derivation that depends on B (SPEC §4-§6, §10), from what does not.
--
-- Reads the temp tables derive_run_facts, derive_step_facts, derive_tree (trace_id, span_id,
-- run_span_id, lifted_from) and derive_seen_before, which derive_refresh.sql builds from the
-- spans, and derive_budgets.sql from the stored runs and steps when only a declaration
-- changed, and derive_cost.sql's derive_cost_runs and derive_cost_steps (tokens and dollars);
-- replaces the runs, steps and reconcile_links rows of those traces, and drops them.

-- 3b. B, the deadline and the window of each run.
CREATE OR REPLACE TEMP TABLE derive_runs AS
WITH declared AS (
    -- SPEC §10: B is the span's own budget.total_ms, else the budget declared for the run's
    -- agent, else the declared default. A change of declarations marks the runs it affects
    -- (store/declared/budgets.py), so past runs follow it.
    SELECT r.*,
           coalesce(r.budget_total_ms, a.budget_ms, dflt.budget_ms) AS budget_ms,
           CASE WHEN r.budget_total_ms IS NOT NULL THEN 'span'
                WHEN coalesce(a.budget_ms, dflt.budget_ms) IS NOT NULL THEN 'declared'
                END AS budget_source
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
       r.week
FROM budgeted r;

-- 4b. The steps with their allocations.
CREATE OR REPLACE TEMP TABLE derive_steps AS
SELECT s.* EXCLUDE (own_allocated_ms),
       coalesce(s.own_allocated_ms, a.allocated_ns // 1000000) AS allocated_ms,
       ((s.end_ns - s.start_ns) / 1e6)
           / nullif(coalesce(s.own_allocated_ms, a.allocated_ns / 1e6), 0) AS utilisation,
       r.agent, r.start_ns AS run_start_ns, r.budget_ms IS NOT NULL AS run_has_budget
FROM derive_step_facts s
JOIN derive_runs r ON r.run_id = s.run_id
-- SPEC §10: a declared cap for the step's key gives a step without budget.allocated_ms the
-- allocation min(cap, B - (step start - s)), in ns (stored as whole ms, rounded down; the
-- utilisation uses it exactly), never below 0; in a run of unknown budget, the cap alone.
LEFT JOIN declared_step_caps c ON c.step_key = s.step_key,
LATERAL (SELECT CASE
    WHEN c.cap_ms IS NULL THEN NULL
    WHEN r.budget_ms IS NULL THEN c.cap_ms * 1000000
    ELSE least(c.cap_ms * 1000000,
               greatest(0, r.budget_ms * 1000000 - (s.start_ns - r.start_ns))) END
    AS allocated_ns) a;

-- 5. Consumption share (SPEC §4). Top-level steps clipped to [s, e]; the distinct start/end
-- points cut [s, e] into elementary intervals; an interval of length dt with n active steps
-- gives dt/n to each. Rather than joining every step with every interval (quadratic in the
-- steps of a run), W(p) = sum of dt/n over the intervals before point p is a running sum, and a
-- step's consumption is W(its clipped end) - W(its clipped start).
CREATE OR REPLACE TEMP TABLE derive_consumption AS
WITH clipped AS (
    SELECT st.trace_id, st.span_id, st.run_id, t.lifted_from,
           greatest(st.start_ns, r.start_ns) AS cs, least(st.end_ns, r.window_end_ns) AS ce
    FROM derive_steps st JOIN derive_runs r USING (run_id)
    JOIN derive_tree t ON t.trace_id = st.trace_id AND t.span_id = st.span_id
                      AND t.run_span_id = r.span_id
    WHERE st.is_top_level AND r.budget_ms IS NOT NULL
), holes AS (
    -- SPEC §9: a model step is not active while a tool lifted out of it runs. The union of
    -- its tools' intervals (clipped to it), as islands of overlapping intervals.
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
-- (SPEC §4; ties: the smaller span id). `holder_at_deadline` tells the two holder cases apart:
-- only a holder active at d was running when the deadline fired.
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

-- 7. The finished run rows, kept apart so that the steps can copy `exhausted` without reading
-- the whole runs table back.
CREATE OR REPLACE TEMP TABLE derive_final_runs AS
SELECT r.run_id, r.trace_id, r.span_id, r.agent, r.start_ns, r.end_ns, r.budget_ms,
       r.budget_source, r.deadline_ns, r.window_end_ns, r.reserve_ms, r.outcome, r.elapsed_ms, r.utilisation,
       r.latest_end_ns, r.overrun_ms,
       -- SPEC §4: a stated outcome decides (a value outside SPEC's list counts as absent),
       -- unless it names another budget than time (budget.run.exhausted_by); otherwise
       -- running to the deadline, or a step refused by time (derive_cost.sql counts them).
       CASE WHEN r.budget_ms IS NULL THEN NULL
            WHEN r.known_outcome IN (/*@run_outcomes*/)
                THEN r.known_outcome IN ('exhausted', 'partial')
                     AND coalesce(k.exhausted_by, 'time') = 'time'
            ELSE r.latest_end_ns >= r.deadline_ns OR coalesce(k.time_refused_steps, 0) > 0
       END AS exhausted,
       coalesce(n.refused_steps, 0) AS refused_steps,
       coalesce(n.steps, 0) AS steps,
       coalesce(n.top_level_steps, 0) AS top_level_steps,
       CASE WHEN r.budget_ms IS NOT NULL
            THEN coalesce(u.unattributed_ms, (r.window_end_ns - r.start_ns) / 1e6) END
           AS unattributed_ms,
       b.culprit_span_id, b.culprit_key, b.culprit_ms, b.culprit_share,
       b.holder_span_id, b.holder_key, r.week,
       b.culprit_step, b.holder_step, b.holder_at_deadline, r.root_missing,
       -- tokens and dollars (docs/metrics.md §11, derive_cost.sql)
       k.* EXCLUDE (run_id, time_refused_steps)
FROM derive_runs r
LEFT JOIN (SELECT run_id, count(*) AS steps, count(*) FILTER (WHERE is_top_level)
                      AS top_level_steps,
                  count(*) FILTER (WHERE class = 'refused') AS refused_steps
           FROM derive_steps GROUP BY ALL) n USING (run_id)
LEFT JOIN (SELECT DISTINCT run_id, unattributed_ms FROM derive_consumption) u USING (run_id)
LEFT JOIN derive_blame b USING (run_id)
LEFT JOIN derive_cost_runs k USING (run_id);

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
       k.* EXCLUDE (trace_id, span_id, run_id, top_step_id, is_top_level, step_key, start_ns,
                    class, refused_by, unpriced_belonging)
FROM derive_steps st
JOIN derive_final_runs r USING (run_id)
LEFT JOIN derive_consumption c ON c.trace_id = st.trace_id AND c.span_id = st.span_id
LEFT JOIN derive_cost_steps k ON k.trace_id = st.trace_id AND k.span_id = st.span_id;

DROP TABLE derive_final_runs;
DROP TABLE derive_cost_runs;
DROP TABLE derive_cost_steps;
DROP TABLE derive_blame;
DROP TABLE derive_consumption;
DROP TABLE derive_steps;
DROP TABLE derive_step_facts;
DROP TABLE derive_tree;
DROP TABLE derive_runs;
DROP TABLE derive_run_facts;
DROP TABLE derive_seen_before;
