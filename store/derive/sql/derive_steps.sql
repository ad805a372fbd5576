-- name: derive_steps
-- The steps, their levels and classes, and the runs' facts, from the walk (docs/conventions.md, docs/metrics.md §3 rule 6, §1).
--
-- Reads what derive_refresh.sql, derive_walk.sql and derive_recognise.sql built; what depends on
-- B is derive_measure.sql, run next in the same transaction.

-- 2b. HTTP client spans beside their call (docs/conventions.md): some tracers do not make their
-- tool or model span current, so the HTTP or gRPC client span the call makes hangs from the run or
-- a wrapper. A row-12 step with no step below it whose interval lies inside exactly one tool or
-- model step of its run and inside no other step (agents, its own ancestors or not, do not count:
-- they hold whatever runs during them) is that call's descendant for every rule: no step, its
-- evidence and that of the spans below it rolls up into the call. Bounded: a run where the pairs
-- to compare would pass PAIR_LIMIT keeps its HTTP spans where they are, and says so
-- (derivation_notes).
-- Most turns have no row-12 step (an HTTP or gRPC client span that is a step of its own): then
-- there is nothing to match, and the four statements below are skipped (each costs ~1-1.5 ms
-- to plan whatever it reads: ~5 ms a small turn), derive_beside made empty for what reads it.
-- gates: whether a client span may hang beside its call
SELECT count(*) > 0 AS beside, count(*) = 0 AS no_beside
FROM (SELECT 1 FROM derive_walk WHERE own AND is_step AND needs_no_step_ancestor LIMIT 1);

-- when: no_beside
CREATE OR REPLACE TEMP TABLE derive_beside (
    trace_id VARCHAR, run_span_id VARCHAR, span_id VARCHAR, tool_span_id VARCHAR,
    tool_path VARCHAR[]
);

-- when: beside
CREATE OR REPLACE TEMP TABLE derive_beside_steps AS
WITH calls AS (
    -- the row-12 steps, few: only their runs are looked at
    SELECT trace_id, run_span_id, span_id FROM derive_walk
    WHERE own AND is_step AND needs_no_step_ancestor
)
SELECT w.trace_id, w.run_span_id, w.span_id, w.step_kind, w.start_ns, w.end_ns, w.path,
       w.needs_no_step_ancestor AND NOT EXISTS (
           SELECT 1 FROM derive_walk b
           WHERE b.trace_id = w.trace_id AND b.run_span_id = w.run_span_id
             AND b.step_parent = w.span_id AND b.own AND b.is_step) AS lone_call
FROM derive_walk w
SEMI JOIN (SELECT DISTINCT trace_id, run_span_id FROM calls) c
       ON c.trace_id = w.trace_id AND c.run_span_id = w.run_span_id
WHERE w.own AND w.is_step AND NOT w.is_agent;

-- when: beside
CREATE OR REPLACE TEMP TABLE derive_beside_runs AS
SELECT trace_id, run_span_id, count(*) FILTER (WHERE lone_call) AS calls, count(*) AS steps,
       count(*) FILTER (WHERE lone_call) * count(*) <= 4000000 AS within_bound
FROM derive_beside_steps
GROUP BY ALL
HAVING count(*) FILTER (WHERE lone_call) > 0
   AND count(*) FILTER (WHERE step_kind IN (/*@holder_kinds*/)) > 0;

-- when: beside
CREATE OR REPLACE TEMP TABLE derive_beside AS
SELECT c.trace_id, c.run_span_id, c.span_id,
       any_value(s.span_id) AS tool_span_id, any_value(s.path) AS tool_path
FROM derive_beside_steps c
JOIN derive_beside_runs r ON r.trace_id = c.trace_id AND r.run_span_id = c.run_span_id
JOIN derive_beside_steps s ON s.trace_id = c.trace_id AND s.run_span_id = c.run_span_id
                          AND s.span_id <> c.span_id
                          AND s.start_ns <= c.start_ns AND s.end_ns >= c.end_ns
WHERE c.lone_call AND r.within_bound
GROUP BY ALL
HAVING count(*) = 1 AND bool_and(s.step_kind IN (/*@holder_kinds*/));

-- when: beside
INSERT INTO derivation_notes BY NAME
SELECT DISTINCT trace_id, 'http_beside_tool_skipped' AS note,
       'a run with ' || calls || ' HTTP or gRPC client steps among ' || steps
       || ' steps: client spans hanging beside their call were not matched to it' AS detail
FROM derive_beside_runs WHERE NOT within_bound;

-- Such a span, and every span whose nearest step it was, roll up into the call instead.
-- when: beside
UPDATE derive_walk w
SET path = b.tool_path, is_step = w.is_step AND w.span_id <> b.span_id
FROM derive_beside b
WHERE w.trace_id = b.trace_id AND w.run_span_id = b.run_span_id AND w.path[-1] = b.span_id;

-- 2d. HTTP client spans in a trace of their own (docs/conventions.md). Each stray of the turn (a
-- trace of one root HTTP client span of row 12 without a budget) joins the one model or tool step
-- of another trace of its service whose interval holds its own; held by two or more, or none, it
-- stays a run. derive_refresh.sql (1a) brought into the turn every trace whose hull holds a stray
-- whose answer may change, so the turn's steps are all there is to look at: the steps of the
-- strays' services, a run that is its own single step (step 4 below) too, cut into 2^30 ns (~1 s)
-- buckets, and each stray compared with those of its bucket. Each stray keeps what its walk
-- below the step reads of it, so that no statement below joins derive_spans again.
-- Keys are numbered (`stray`, `step`) so that the pairs are counted on integers, not on ids.
-- when: strays
CREATE OR REPLACE TEMP TABLE derive_strays AS
WITH strays AS MATERIALIZED (
    SELECT row_number() OVER () AS stray, s.trace_id, s.span_id,
           coalesce(s.service_name, '') AS service_name, s.start_ns, s.end_ns, s.is_agent,
           s.step_row, s.step_kind, s.step_name, s.needs_no_step_ancestor, s.specific,
           s.has_evidence
    FROM derive_spans s
    SEMI JOIN (SELECT trace_id FROM derive_anchors WHERE spans = 1) a USING (trace_id)
    WHERE s.stray_root
), self_runs AS MATERIALIZED (
    -- runs whose own span is a model or tool candidate, few: those that hold no step are their
    -- own single step (step 4 below)
    SELECT trace_id, span_id, start_ns, end_ns, coalesce(service_name, '') AS service_name
    FROM derive_spans WHERE is_run AND candidate AND step_kind IN (/*@holder_kinds*/)
), self_walked AS MATERIALIZED (
    SELECT w.trace_id, w.run_span_id, w.span_id
    FROM derive_walk w SEMI JOIN self_runs USING (trace_id)
    WHERE w.own AND w.is_step
), held AS MATERIALIZED (
    SELECT row_number() OVER () AS step, *
    FROM (SELECT w.trace_id, w.span_id, w.run_span_id, w.start_ns, w.end_ns, s.service_name
          FROM derive_walk w
          JOIN (SELECT trace_id, span_id, coalesce(service_name, '') AS service_name
                FROM derive_spans WHERE step_kind IN (/*@holder_kinds*/)) s
            ON s.trace_id = w.trace_id AND s.span_id = w.span_id
          WHERE w.own AND w.is_step AND w.step_kind IN (/*@holder_kinds*/)
          UNION ALL
          SELECT r.trace_id, r.span_id, r.span_id, r.start_ns, r.end_ns, r.service_name
          FROM self_runs r
          WHERE NOT EXISTS (SELECT 1 FROM self_walked w
                            WHERE w.trace_id = r.trace_id AND w.run_span_id = r.span_id)
            AND NOT EXISTS (SELECT 1 FROM self_walked w
                            WHERE w.trace_id = r.trace_id AND w.span_id = r.span_id))
    WHERE service_name IN (SELECT service_name FROM strays)
), holding AS (
    SELECT s.stray, k.step
    FROM strays s
    JOIN (SELECT step, trace_id, service_name, start_ns, end_ns,
                 unnest(range(start_ns // 1073741824, end_ns // 1073741824 + 1)) AS bucket
          FROM held WHERE end_ns // 1073741824 - start_ns // 1073741824 < 4096) k
      ON k.service_name = s.service_name AND k.bucket = s.start_ns // 1073741824
    WHERE k.start_ns <= s.start_ns AND k.end_ns >= s.end_ns AND k.trace_id <> s.trace_id
    UNION ALL
    SELECT s.stray, k.step
    FROM strays s
    JOIN (SELECT * FROM held WHERE end_ns // 1073741824 - start_ns // 1073741824 >= 4096) k
      ON k.service_name = s.service_name
    WHERE k.start_ns <= s.start_ns AND k.end_ns >= s.end_ns AND k.trace_id <> s.trace_id
), joined AS (
    SELECT stray, any_value(step) AS step FROM holding GROUP BY stray HAVING count(*) = 1
)
SELECT s.* EXCLUDE (stray), h.trace_id AS holder_trace_id, h.span_id AS holder_span_id,
       h.run_span_id AS holder_run_span_id
FROM strays s LEFT JOIN joined j USING (stray) LEFT JOIN held h USING (step);

-- The strays that joined a step (derive_explain.sql reads it; so does the token and dollar
-- derivation: a stray's usage is its holder's).
CREATE OR REPLACE TEMP TABLE derive_stray_joins (
    trace_id VARCHAR, span_id VARCHAR, holder_trace_id VARCHAR, holder_span_id VARCHAR,
    holder_run_span_id VARCHAR
);
-- when: strays
INSERT INTO derive_stray_joins
SELECT trace_id, span_id, holder_trace_id, holder_span_id, holder_run_span_id
FROM derive_strays WHERE holder_span_id IS NOT NULL;

-- when: strays_seen_before
DELETE FROM stray_calls WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
-- when: strays
INSERT INTO stray_calls BY NAME
SELECT trace_id, span_id, service_name, start_ns // 17179869184 AS bucket, start_ns, end_ns,
       holder_trace_id, holder_span_id, holder_run_span_id
FROM derive_strays;

-- gates: whether a stray joined a step this turn
-- when: strays
SELECT (SELECT count(*) FROM derive_stray_joins) > 0 AS stray_joins;

-- A stray that joined a step is no run: its own walk goes, and it is walked below that step
-- (not a step, its evidence rolling up, its end counting to the run's latest end).
-- when: stray_joins
DELETE FROM derive_walk WHERE trace_id IN (SELECT trace_id FROM derive_stray_joins);
-- when: stray_joins
UPDATE derive_spans SET is_run = false
FROM derive_stray_joins j
WHERE j.trace_id = derive_spans.trace_id AND j.span_id = derive_spans.span_id;
-- when: stray_joins
INSERT INTO derive_walk BY NAME
SELECT h.trace_id, h.run_span_id, s.span_id, false AS is_step, h.span_id AS step_parent,
       h.span_id AS step_ctx, true AS plain_step_above, h.path, true AS own, false AS nested,
       h.depth + 1 AS depth, s.start_ns, s.end_ns, s.is_agent, s.step_row, s.step_kind,
       s.step_name, s.needs_no_step_ancestor, s.specific, s.has_evidence
FROM derive_strays s
JOIN derive_walk h ON h.trace_id = s.holder_trace_id AND h.span_id = s.holder_span_id
                  AND h.run_span_id = s.holder_run_span_id;

-- Spans deeper than 200 levels below their run (or on a parent cycle) are not walked: said on
-- the trace, looked for only where the walk reached that depth.
INSERT INTO derivation_notes BY NAME
SELECT DISTINCT trace_id, 'walk_depth_capped' AS note,
       'spans more than 200 levels below their run are not measured' AS detail
FROM derive_walk WHERE depth >= 200;

-- 2c. The runs' own tree: each run with every run nested in it (itself included), for the latest
-- end (docs/metrics.md §4's overrun counts what a nested run ran past the outer deadline). Runs
-- nest at most 16 deep here (derive_recognise.sql measures deeper ones as part of the run around
-- them), so this holds at most 17 rows a run.
CREATE OR REPLACE TEMP TABLE derive_run_tree AS
WITH RECURSIVE tree(trace_id, run_span_id, below_span_id) AS (
    SELECT trace_id, span_id, span_id FROM derive_walk WHERE depth = 0
    UNION ALL
    SELECT t.trace_id, t.run_span_id, w.span_id
    FROM tree t
    JOIN derive_walk w ON w.trace_id = t.trace_id AND w.run_span_id = t.below_span_id
    WHERE w.nested AND w.depth > 0
)
SELECT * FROM tree;

-- 3. Run-level facts that depend neither on steps nor on B (derive_measure.sql applies B).
CREATE OR REPLACE TEMP TABLE derive_run_facts AS
WITH lone_agent AS (
    -- docs/conventions.md, the run's agent: the agent step that stands alone among the run's
    -- top-level steps (wrappers are transparent already: the walk's step_parent skips them),
    -- whether or not it is itself made transparent; when such agents nest, the outermost, which is
    -- this one.
    SELECT trace_id, run_span_id, any_value(step_name) AS name
    FROM derive_walk
    WHERE own AND is_step AND step_parent IS NULL
    GROUP BY ALL
    HAVING count(*) = 1 AND bool_and(is_agent)
), runs_raw AS (
    SELECT r.*,
           -- the root is the run "trace_id" only when the trace has exactly one root
           count(*) FILTER (WHERE r.parent_span_id IS NULL)
               OVER (PARTITION BY r.trace_id) AS roots_in_trace,
           -- the run's agent (docs/conventions.md): the run span's gen_ai.agent.name, or its name
           -- when it is an agent span of row 10 (a workflow's traceloop.entity.name names no
           -- agent), else the lone agent's name, else the resource's service.name
           coalesce(nullif(r.gen_ai_agent_name, ''), CASE WHEN r.is_agent THEN r.step_name END,
                    a.name, r.service_name) AS agent
    FROM derive_spans r
    LEFT JOIN lone_agent a ON a.trace_id = r.trace_id AND a.run_span_id = r.span_id
    WHERE r.is_run
), latest AS (
    -- the latest end of each run's own spans and of the runs nested in it (derive_run_tree)
    SELECT t.trace_id, t.run_span_id, max(o.own_end_ns) AS latest_end_ns
    FROM derive_run_tree t
    JOIN (SELECT trace_id, run_span_id, max(end_ns) AS own_end_ns FROM derive_walk GROUP BY ALL) o
      ON o.trace_id = t.trace_id AND o.run_span_id = t.below_span_id
    GROUP BY ALL
)
-- a run whose root never arrived is its trace's only run: its id is the trace id, as the run
-- of the root will be when the root comes after all
SELECT CASE WHEN (r.parent_span_id IS NULL AND r.roots_in_trace = 1) OR r.root_missing
            THEN r.trace_id ELSE r.trace_id || '/' || r.span_id END AS run_id,
       r.trace_id, r.span_id,
       r.agent,
       r.start_ns, r.end_ns,
       r.budget_total_ms, r.budget_deadline_unix_ms,
       r.budget_reserve_ms AS reserve_ms,
       r.budget_run_outcome AS outcome,
       l.latest_end_ns,
       r.root_missing,
       -- docs/metrics.md §11.5: the budgets the run states in tokens and dollars, and which
       -- budget its stated outcome names (a value outside §2's is absent: time)
       r.budget_total_tokens, r.budget_total_usd_nano,
       CASE WHEN r.budget_run_exhausted_by IN (/*@budget_dimensions*/)
            THEN r.budget_run_exhausted_by END AS exhausted_by,
       printf('%d-W%02d', isoyear(make_timestamp(r.start_ns // 1000)),
              week(make_timestamp(r.start_ns // 1000))) AS week
FROM runs_raw r
JOIN latest l ON l.trace_id = r.trace_id AND l.run_span_id = r.span_id;

-- 4. Steps (docs/conventions.md). First the steps of each run as the walk found them, each with its
-- nearest step above (wrappers are transparent already: only steps were kept as step_parent).
-- A run span that matches a row, holds no step and is no step of another run is its own single
-- top-level step (a trace that is one auto-instrumented model call).
-- An agent is transparent when it is the only step under its parent step (or the run) and
-- has a step below it. That test is local: a transparent agent was alone, so its steps take
-- its place as a group of exactly the same members.
CREATE OR REPLACE TEMP TABLE derive_step_tree AS
WITH walked AS (
    SELECT trace_id, run_span_id, span_id, step_parent, step_kind, is_agent
    FROM derive_walk WHERE own AND is_step
), self_steps AS (
    SELECT r.trace_id, r.span_id AS run_span_id, r.span_id, NULL::VARCHAR AS step_parent,
           r.step_kind, r.is_agent
    FROM derive_spans r
    WHERE r.is_run AND r.candidate
      AND NOT EXISTS (SELECT 1 FROM walked w
                      WHERE w.trace_id = r.trace_id AND w.run_span_id = r.span_id)
      AND NOT EXISTS (SELECT 1 FROM walked w
                      WHERE w.trace_id = r.trace_id AND w.span_id = r.span_id)
), found AS (
    SELECT * FROM walked UNION ALL SELECT * FROM self_steps
), children AS (
    -- the steps below each step (and below each run: step_parent NULL); joined twice, for a
    -- step's own count and its siblings' (a window over `found` for the latter cost ~6 ms
    -- more per 40,960 GenAI spans, ~10 per 40,960 receivers' spans)
    SELECT trace_id, run_span_id, step_parent, count(*) AS steps_below
    FROM found GROUP BY ALL
)
SELECT f.trace_id, f.run_span_id, f.span_id, f.step_parent, f.step_kind,
       f.is_agent AND s.steps_below = 1 AND coalesce(c.steps_below, 0) > 0 AS transparent
FROM found f
LEFT JOIN children c ON c.trace_id = f.trace_id AND c.run_span_id = f.run_span_id
                    AND c.step_parent = f.span_id
JOIN children s ON s.trace_id = f.trace_id AND s.run_span_id = f.run_span_id
               AND s.step_parent IS NOT DISTINCT FROM f.step_parent;

-- Levels, walking the steps down: a transparent agent adds no level (it passes its parent's
-- level, top and kind on: `ctx_*`); a tool whose parent step is a model step stands at the
-- model's level (`lifted_from` names the model, which is not active while it runs, step 5).
CREATE OR REPLACE TEMP TABLE derive_tree AS
WITH RECURSIVE tree(trace_id, run_span_id, span_id, transparent, step_level, top_step_id,
                    ctx_id, ctx_kind, lifted_from, depth) AS (
    SELECT trace_id, run_span_id, span_id, transparent,
           CASE WHEN transparent THEN -1 ELSE 0 END,
           CASE WHEN transparent THEN NULL ELSE span_id END,
           CASE WHEN transparent THEN NULL ELSE span_id END,
           CASE WHEN transparent THEN NULL ELSE step_kind END,
           NULL::VARCHAR, 0
    FROM derive_step_tree WHERE step_parent IS NULL
    UNION ALL
    SELECT n.trace_id, n.run_span_id, n.span_id, n.transparent,
           CASE WHEN n.transparent OR (n.step_kind = 'tool' AND t.ctx_kind = 'model')
                THEN t.step_level ELSE t.step_level + 1 END,
           CASE WHEN n.transparent THEN t.top_step_id
                WHEN (CASE WHEN n.step_kind = 'tool' AND t.ctx_kind = 'model'
                           THEN t.step_level ELSE t.step_level + 1 END) = 0 THEN n.span_id
                ELSE t.top_step_id END,
           CASE WHEN n.transparent THEN t.ctx_id ELSE n.span_id END,
           CASE WHEN n.transparent THEN t.ctx_kind ELSE n.step_kind END,
           CASE WHEN NOT n.transparent AND n.step_kind = 'tool' AND t.ctx_kind = 'model'
                THEN t.ctx_id END,
           t.depth + 1
    FROM tree t
    JOIN derive_step_tree n ON n.trace_id = t.trace_id AND n.run_span_id = t.run_span_id
                           AND n.step_parent = t.span_id
    WHERE t.depth < 200
)
-- Each step is reached once: derive_step_tree holds a step once per run, and its step_parent
-- is a step above it in the (acyclic) walk.
SELECT * FROM tree WHERE NOT transparent;

-- Rule 6's evidence: for every step, the last-ending span below it (steps or not) that carries
-- outcome evidence (ties: the later start, then the larger span id), and the class rules 1-4
-- give that span (NULL when none: arg_max_null keeps it, where arg_max would skip that span).
-- An aggregate, where a window's row_number() = 1 cost twice the CPU (~11 -> ~6 ms per 40,960
-- GenAI spans); a span is walked once per run, so its id breaks every tie.
CREATE OR REPLACE TEMP TABLE derive_rolled AS
SELECT trace_id, run_span_id, above AS span_id,
       arg_max_null(specific, (end_ns, start_ns, span_id)) AS rolled_class
FROM (
    SELECT trace_id, run_span_id, span_id, unnest(path) AS above, specific, end_ns, start_ns
    FROM derive_walk
    WHERE has_evidence AND depth > 0
)
WHERE above <> span_id
GROUP BY trace_id, run_span_id, above;

CREATE OR REPLACE TEMP TABLE derive_step_facts AS
WITH classed AS (
    SELECT t.*, s.*,
           -- rule 6: a step without evidence of its own (rule 4's fallback or rule 5),
           -- whatever its status (several instrumentations mark every call that returns OK)
           CASE WHEN s.specific IS NULL
                     AND g.rolled_class IN (/*@roll_up_classes*/) THEN g.rolled_class
                ELSE s.own_class END AS class
    FROM derive_tree t
    JOIN derive_spans s ON s.trace_id = t.trace_id AND s.span_id = t.span_id
    LEFT JOIN derive_rolled g ON g.trace_id = t.trace_id AND g.run_span_id = t.run_span_id
                             AND g.span_id = t.span_id
)
SELECT r.run_id, s.trace_id, s.span_id, s.parent_span_id, s.top_step_id,
       s.step_level = 0 AS is_top_level,
       s.step_level,
       s.name AS span_name, s.step_kind AS kind, s.step_name AS name,
       s.step_kind || ':' || s.step_name AS step_key,
       s.convention,
       s.class, s.start_ns, s.end_ns, (s.end_ns - s.start_ns) / 1e6 AS duration_ms,
       s.budget_remaining_ms AS remaining_ms, s.budget_cap_ms AS cap_ms,
       s.budget_allocated_ms AS own_allocated_ms,
       s.budget_side_effect AS side_effect, s.budget_effect_status AS effect_status,
       s.budget_idempotency_key AS idempotency_key, s.budget_attempt AS attempt,
       s.budget_hedge AS hedge, s.budget_reconcile_result AS reconcile_result,
       s.budget_cleanup_ms AS cleanup_ms,
       coalesce(s.budget_side_effect = 'write', false) AS is_write,
       -- docs/metrics.md §6: effect_status decides when present; absent that, the class does
       coalesce(s.budget_side_effect = 'write', false) AND CASE
           WHEN s.budget_effect_status IS NOT NULL THEN s.budget_effect_status = 'possible'
           ELSE s.class IN ('client_timeout', 'cancelled') END AS is_uncertain,
       CASE WHEN s.step_kind = 'reconcile' THEN s.link_targets END AS link_targets,
       -- which budget refused a refused step (docs/metrics.md §2, §3 rule 1b): its own
       -- budget.refused_by, else usd for a gateway's budget refusal, else time
       CASE WHEN s.class = 'refused' THEN coalesce(
           CASE WHEN s.budget_refused_by IN (/*@budget_dimensions*/) THEN s.budget_refused_by END,
           CASE WHEN s.budget_refusal THEN /*@budget_refusal_by*/ END, 'time') END AS refused_by
FROM classed s
JOIN derive_run_facts r ON r.trace_id = s.trace_id AND r.span_id = s.run_span_id;

-- The tools lifted out of a model step (docs/conventions.md), kept for derive_budgets.sql: what the
-- consumption share needs of the step tree when only B changed.
-- when: seen_before
DELETE FROM step_lifts WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
INSERT INTO step_lifts BY NAME
SELECT trace_id, run_span_id, span_id, lifted_from FROM derive_tree WHERE lifted_from IS NOT NULL;

