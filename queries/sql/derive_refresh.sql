-- name: derive_refresh
-- Recompute the runs and steps rows of every trace in the temp table touched_traces (SPEC §1-§6).
--
-- Runs inside the writer's transaction, after the batch's spans are stored. It reads all stored
-- spans of the touched traces (not only the batch), so the result is the same whatever order
-- and in however many batches a trace's spans arrived, and a duplicate delivery changes nothing.
-- Set-based throughout: no loop over runs.

-- 0. Where to start reading spans: the earliest first arrival of a touched trace, less a margin
-- for a wall clock stepped back between two writes (received_at is now() of each write).
-- A trace seen for the first time arrives now, in this transaction, and has no derived rows
-- yet, so step 8 deletes only for traces seen before (most of a stream's batches are new
-- traces, and each delete is a scan of its whole table).
-- touched_traces(trace_id, since) says since when each trace has spans not yet derived: the
-- derivation may run long after the write that stored them (see ingest/derivation.py).
CREATE OR REPLACE TEMP TABLE derive_touched AS
SELECT t.trace_id, a.first_received_at, t.since
FROM (SELECT trace_id, min(since) AS since FROM touched_traces GROUP BY trace_id) t
LEFT JOIN trace_arrivals a ON a.trace_id = t.trace_id;

INSERT INTO trace_arrivals
SELECT trace_id, since FROM derive_touched WHERE first_received_at IS NULL;

CREATE OR REPLACE TEMP TABLE derive_floor AS
SELECT coalesce(min(coalesce(first_received_at, since)), now()) - INTERVAL 1 MINUTE
           AS received_floor
FROM derive_touched;

CREATE OR REPLACE TEMP TABLE derive_seen_before AS
SELECT trace_id FROM derive_touched WHERE first_received_at IS NOT NULL;

-- 1. The touched traces' spans, with step kind, name and class resolved (SPEC §2, §3).
CREATE OR REPLACE TEMP TABLE derive_spans AS
WITH picked AS (
    SELECT s.*,
           s.budget_step_kind IS NOT NULL OR s.gen_ai_operation_name IS NOT NULL AS is_step,
           coalesce(s.budget_step_kind, CASE
               WHEN s.gen_ai_operation_name IN ('chat', 'text_completion', 'generate_content')
                   THEN 'model'
               WHEN s.gen_ai_operation_name = 'execute_tool' THEN 'tool'
               WHEN s.gen_ai_operation_name = 'invoke_agent' THEN 'subagent'
               ELSE 'other' END) AS step_kind,
           -- SPEC §3 rule 4 reads error.type first, then each exception event's type: the first
           -- non-empty one decides, because any non-empty value matches some sub-rule.
           lower(list_filter(list_concat([s.error_type], s.exception_types),
                             lambda x: x IS NOT NULL AND trim(x) <> '')[1]) AS error_text,
           lower(trim(s.budget_outcome)) AS given_outcome
    FROM spans s
    WHERE s.received_at >= (SELECT received_floor FROM derive_floor)
      AND s.trace_id IN (SELECT trace_id FROM touched_traces)
)
SELECT trace_id, span_id, parent_span_id, name, start_ns, end_ns, status_code, service_name,
       gen_ai_agent_name, budget_total_ms, budget_deadline_unix_ms, budget_reserve_ms,
       budget_run_outcome, budget_remaining_ms, budget_cap_ms, budget_allocated_ms,
       budget_side_effect, budget_effect_status, budget_idempotency_key, budget_attempt,
       budget_hedge, budget_reconcile_result, budget_cleanup_ms,
       budget_total_ms IS NOT NULL OR parent_span_id IS NULL AS is_run,
       is_step,
       step_kind,
       coalesce(budget_step_name, CASE step_kind
           WHEN 'tool' THEN gen_ai_tool_name
           WHEN 'model' THEN gen_ai_request_model
           WHEN 'subagent' THEN gen_ai_agent_name END, name) AS step_name,
       CASE
           -- rule 1: an outcome the agent stated; a value outside SPEC's list falls through
           WHEN given_outcome IN ('ok', 'client_timeout', 'upstream_error', 'refused',
                                  'cancelled', 'client_error', 'error') THEN given_outcome
           -- rule 2: HTTP; a 504 is the upstream's gateway giving up, not us
           WHEN http_response_status_code BETWEEN 500 AND 599
                OR http_response_status_code IN (408, 429) THEN 'upstream_error'
           WHEN http_response_status_code BETWEEN 400 AND 499 THEN 'client_error'
           -- rule 3: gRPC, already normalised to its number by ingest
           WHEN grpc_status_code = 4 THEN 'client_timeout'
           WHEN grpc_status_code = 1 THEN 'cancelled'
           WHEN grpc_status_code IN (2, 8, 10, 13, 14, 15) THEN 'upstream_error'
           WHEN grpc_status_code IN (3, 5, 6, 7, 9, 11, 12, 16) THEN 'client_error'
           -- rule 4: error.type, then exception types, case-insensitive
           WHEN error_text IS NOT NULL THEN CASE
               WHEN error_text LIKE '%timeout%' OR error_text LIKE '%timedout%'
                    OR error_text LIKE '%deadline%' THEN 'client_timeout'
               WHEN error_text LIKE '%cancel%' THEN 'cancelled'
               WHEN regexp_full_match(trim(error_text), '5[0-9][0-9]')
                    OR error_text LIKE '%connection%' OR error_text LIKE '%unavailable%'
                    OR error_text LIKE '%refused%' OR error_text LIKE '%reset%'
                   THEN 'upstream_error'
               ELSE 'error' END
           -- rule 5: span status
           WHEN status_code = 2 THEN 'error'
           ELSE 'ok' END AS class,
       list_transform(links, lambda l: {'trace_id': l.trace_id, 'span_id': l.span_id})
           AS link_targets
FROM picked;

-- 2. Walk down from every run span. A nested run (a span with its own budget.total_ms) is still
-- a step of the outer run when it carries step attributes (`own`), but what is below it belongs
-- to it (`nested`). Its spans still count for the outer run's latest end (overrun, SPEC §4).
-- The depth cap stops a malformed parent cycle from recursing forever.
CREATE OR REPLACE TEMP TABLE derive_walk AS
WITH RECURSIVE walk(trace_id, run_span_id, span_id, top_step_id, step_level, own, nested,
                    depth) AS (
    SELECT trace_id, span_id, span_id, NULL::VARCHAR, -1, false, false, 0
    FROM derive_spans WHERE is_run
    UNION ALL
    SELECT c.trace_id, w.run_span_id, c.span_id,
           CASE WHEN w.top_step_id IS NULL AND c.is_step AND NOT w.nested
                THEN c.span_id ELSE w.top_step_id END,
           w.step_level + CASE WHEN c.is_step AND NOT w.nested THEN 1 ELSE 0 END,
           NOT w.nested,
           w.nested OR c.is_run,
           w.depth + 1
    FROM walk w
    JOIN derive_spans c ON c.trace_id = w.trace_id AND c.parent_span_id = w.span_id
    WHERE w.depth < 200
)
-- A span reached twice (only possible in a cyclic trace) keeps its shallowest path.
SELECT * FROM walk
QUALIFY row_number() OVER (PARTITION BY trace_id, run_span_id, span_id ORDER BY depth) = 1;

-- 3. Run-level facts that do not depend on steps.
CREATE OR REPLACE TEMP TABLE derive_runs AS
WITH runs_raw AS (
    SELECT r.*,
           -- the root is the run "trace_id" only when the trace has exactly one root
           count(*) FILTER (WHERE r.parent_span_id IS NULL)
               OVER (PARTITION BY r.trace_id) AS roots_in_trace,
           coalesce(r.gen_ai_agent_name, r.service_name) AS agent
    FROM derive_spans r WHERE r.is_run
), declared AS (
    -- SPEC §10: B is the span's own budget.total_ms, else the budget declared for the run's
    -- agent, else the declared default. A change of declarations marks the runs it affects
    -- pending (ingest/declared_budgets.py), so past runs follow it.
    SELECT r.*,
           coalesce(r.budget_total_ms, a.budget_ms, dflt.budget_ms) AS budget_ms,
           CASE WHEN r.budget_total_ms IS NOT NULL THEN 'span'
                WHEN coalesce(a.budget_ms, dflt.budget_ms) IS NOT NULL THEN 'declared'
                END AS budget_source
    FROM runs_raw r
    LEFT JOIN declared_budgets a ON a.scope = 'agent' AND a.agent = r.agent
    LEFT JOIN declared_budgets dflt ON dflt.scope = 'default'
), budgeted AS (
    -- d = budget.deadline_unix_ms when present, else s + B
    SELECT *,
           CASE WHEN budget_ms IS NOT NULL THEN coalesce(
               budget_deadline_unix_ms * 1000000, start_ns + budget_ms * 1000000) END
               AS deadline_ns
    FROM declared
), latest AS (
    SELECT w.trace_id, w.run_span_id, max(s.end_ns) AS latest_end_ns
    FROM derive_walk w
    JOIN derive_spans s ON s.trace_id = w.trace_id AND s.span_id = w.span_id
    GROUP BY ALL
)
SELECT CASE WHEN r.parent_span_id IS NULL AND r.roots_in_trace = 1 THEN r.trace_id
            ELSE r.trace_id || '/' || r.span_id END AS run_id,
       r.trace_id, r.span_id,
       r.agent,
       r.start_ns, r.end_ns,
       r.budget_ms,
       r.budget_source,
       r.deadline_ns,
       -- e = min(run end, d), kept >= s so that an absurd deadline gives an empty window
       CASE WHEN r.deadline_ns IS NOT NULL
            THEN greatest(r.start_ns, least(r.end_ns, r.deadline_ns)) END AS window_end_ns,
       r.budget_reserve_ms AS reserve_ms,
       r.budget_run_outcome AS outcome,
       (r.end_ns - r.start_ns) / 1e6 AS elapsed_ms,
       ((r.end_ns - r.start_ns) / 1e6) / nullif(r.budget_ms, 0) AS utilisation,
       l.latest_end_ns,
       CASE WHEN r.deadline_ns IS NOT NULL
            THEN greatest(0, l.latest_end_ns - r.deadline_ns) / 1e6 END AS overrun_ms,
       lower(trim(r.budget_run_outcome)) AS known_outcome,
       printf('%d-W%02d', isoyear(make_timestamp(r.start_ns // 1000)),
              week(make_timestamp(r.start_ns // 1000))) AS week
FROM budgeted r
JOIN latest l ON l.trace_id = r.trace_id AND l.run_span_id = r.span_id;

-- 4. Steps: spans on a run's own walk (not below a nested run) that carry step attributes.
CREATE OR REPLACE TEMP TABLE derive_steps AS
SELECT r.run_id, s.trace_id, s.span_id, s.parent_span_id, w.top_step_id,
       w.top_step_id = s.span_id AS is_top_level,
       w.step_level,
       s.name AS span_name, s.step_kind AS kind, s.step_name AS name,
       s.step_kind || ':' || s.step_name AS step_key,
       s.class, s.start_ns, s.end_ns, (s.end_ns - s.start_ns) / 1e6 AS duration_ms,
       s.budget_remaining_ms AS remaining_ms, s.budget_cap_ms AS cap_ms,
       coalesce(s.budget_allocated_ms, a.allocated_ns // 1000000) AS allocated_ms,
       ((s.end_ns - s.start_ns) / 1e6)
           / nullif(coalesce(s.budget_allocated_ms, a.allocated_ns / 1e6), 0) AS utilisation,
       s.budget_side_effect AS side_effect, s.budget_effect_status AS effect_status,
       s.budget_idempotency_key AS idempotency_key, s.budget_attempt AS attempt,
       s.budget_hedge AS hedge, s.budget_reconcile_result AS reconcile_result,
       s.budget_cleanup_ms AS cleanup_ms,
       coalesce(s.budget_side_effect = 'write', false) AS is_write,
       -- SPEC §6: effect_status decides when present; absent that, the class does
       coalesce(s.budget_side_effect = 'write', false) AND CASE
           WHEN s.budget_effect_status IS NOT NULL THEN s.budget_effect_status = 'possible'
           ELSE s.class IN ('client_timeout', 'cancelled') END AS is_uncertain,
       CASE WHEN s.step_kind = 'reconcile' THEN s.link_targets END AS link_targets,
       r.agent, r.start_ns AS run_start_ns, r.budget_ms IS NOT NULL AS run_has_budget
FROM derive_walk w
JOIN derive_spans s ON s.trace_id = w.trace_id AND s.span_id = w.span_id
JOIN derive_runs r ON r.trace_id = w.trace_id AND r.span_id = w.run_span_id
-- SPEC §10: a declared cap for the step's key gives a step without budget.allocated_ms the
-- allocation min(cap, B - (step start - s)), in ns (stored as whole ms, rounded down; the
-- utilisation uses it exactly), never below 0; in a run of unknown budget, the cap alone.
LEFT JOIN declared_step_caps c ON c.step_key = s.step_kind || ':' || s.step_name,
LATERAL (SELECT CASE
    WHEN c.cap_ms IS NULL THEN NULL
    WHEN r.budget_ms IS NULL THEN c.cap_ms * 1000000
    ELSE least(c.cap_ms * 1000000,
               greatest(0, r.budget_ms * 1000000 - (s.start_ns - r.start_ns))) END
    AS allocated_ns) a
WHERE w.own AND s.is_step;

-- 5. Consumption share (SPEC §4). Top-level steps clipped to [s, e]; the distinct start/end
-- points cut [s, e] into elementary intervals; an interval of length dt with n active steps
-- gives dt/n to each. Rather than joining every step with every interval (quadratic in the
-- steps of a run), W(p) = sum of dt/n over the intervals before point p is a running sum, and a
-- step's consumption is W(its clipped end) - W(its clipped start).
CREATE OR REPLACE TEMP TABLE derive_consumption AS
WITH clipped AS (
    SELECT st.trace_id, st.span_id, st.run_id,
           greatest(st.start_ns, r.start_ns) AS cs, least(st.end_ns, r.window_end_ns) AS ce
    FROM derive_steps st JOIN derive_runs r USING (run_id)
    WHERE st.is_top_level AND r.budget_ms IS NOT NULL
), edges AS (
    SELECT run_id, cs AS p, 1 AS delta FROM clipped WHERE cs < ce
    UNION ALL SELECT run_id, ce, -1 FROM clipped WHERE cs < ce
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
       CASE WHEN c.cs < c.ce THEN (we.w_before - ws.w_before) / 1e6 ELSE 0 END AS consumption_ms,
       u.unattributed_ms
FROM clipped c
JOIN unattributed u USING (run_id)
LEFT JOIN weighted ws ON ws.run_id = c.run_id AND ws.p = c.cs
LEFT JOIN weighted we ON we.run_id = c.run_id AND we.p = c.ce;

-- 6. Culprit (largest consumption; ties: earliest start, then span id) and holder (the
-- top-level step active at d, i.e. started before d and not ended before d; several: the
-- latest started; none: the last one to start before the run span ended).
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
           consumption_ms AS culprit_ms, consumption_ms / budget_ms AS culprit_share
    FROM top
    QUALIFY row_number() OVER (PARTITION BY run_id
                               ORDER BY consumption_ms DESC, start_ns, span_id) = 1
), holder AS (
    SELECT run_id, span_id AS holder_span_id, step_key AS holder_key
    FROM top
    WHERE start_ns < run_end_ns OR (start_ns < deadline_ns AND end_ns >= deadline_ns)
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY
        (start_ns < deadline_ns AND end_ns >= deadline_ns) DESC, start_ns DESC, span_id) = 1
)
SELECT * FROM culprit FULL JOIN holder USING (run_id);

-- 7. The finished run rows, kept apart so that the steps can copy `exhausted` without reading
-- the whole runs table back.
CREATE OR REPLACE TEMP TABLE derive_final_runs AS
SELECT r.run_id, r.trace_id, r.span_id, r.agent, r.start_ns, r.end_ns, r.budget_ms,
       r.budget_source, r.deadline_ns, r.window_end_ns, r.reserve_ms, r.outcome, r.elapsed_ms, r.utilisation,
       r.latest_end_ns, r.overrun_ms,
       -- SPEC §4: a stated outcome decides (a value outside SPEC's list counts as absent);
       -- otherwise running to the deadline, or a refused step.
       CASE WHEN r.budget_ms IS NULL THEN NULL
            WHEN r.known_outcome IN ('completed', 'partial', 'exhausted', 'failed', 'cancelled')
                THEN r.known_outcome IN ('exhausted', 'partial')
            ELSE r.latest_end_ns >= r.deadline_ns OR coalesce(n.refused_steps, 0) > 0
       END AS exhausted,
       coalesce(n.refused_steps, 0) AS refused_steps,
       coalesce(n.steps, 0) AS steps,
       coalesce(n.top_level_steps, 0) AS top_level_steps,
       CASE WHEN r.budget_ms IS NOT NULL
            THEN coalesce(u.unattributed_ms, (r.window_end_ns - r.start_ns) / 1e6) END
           AS unattributed_ms,
       b.culprit_span_id, b.culprit_key, b.culprit_ms, b.culprit_share,
       b.holder_span_id, b.holder_key, r.week
FROM derive_runs r
LEFT JOIN (SELECT run_id, count(*) AS steps, count(*) FILTER (WHERE is_top_level)
                      AS top_level_steps,
                  count(*) FILTER (WHERE class = 'refused') AS refused_steps
           FROM derive_steps GROUP BY ALL) n USING (run_id)
LEFT JOIN (SELECT DISTINCT run_id, unattributed_ms FROM derive_consumption) u USING (run_id)
LEFT JOIN derive_blame b USING (run_id);

-- 8. Replace the touched traces' rows.
DELETE FROM steps WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
DELETE FROM runs WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);

INSERT INTO runs BY NAME SELECT * FROM derive_final_runs;

DELETE FROM reconcile_links WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
INSERT INTO reconcile_links BY NAME
SELECT trace_id, span_id, run_id, target.trace_id AS target_trace_id,
       target.span_id AS target_span_id, idempotency_key,
       coalesce(reconcile_result, 'unknown') AS result, start_ns, end_ns
FROM (SELECT *, unnest(link_targets) AS target FROM derive_steps
      WHERE kind = 'reconcile' AND len(link_targets) > 0);

INSERT INTO steps BY NAME
SELECT st.*, c.consumption_ms, r.exhausted AS run_exhausted
FROM derive_steps st
JOIN derive_final_runs r USING (run_id)
LEFT JOIN derive_consumption c ON c.trace_id = st.trace_id AND c.span_id = st.span_id;

DROP TABLE derive_final_runs;
DROP TABLE derive_blame;
DROP TABLE derive_consumption;
DROP TABLE derive_steps;
DROP TABLE derive_runs;
DROP TABLE derive_walk;
DROP TABLE derive_spans;
DROP TABLE derive_floor;
DROP TABLE derive_seen_before;
DROP TABLE derive_touched;
