-- name: derive_refresh
-- Recompute the runs and steps rows of every trace in the temp table touched_traces (SPEC §1-§6).
--
-- Runs in a derivation turn's transaction (store/derivation.py), after the spans' own
-- commit. It reads all stored spans of the touched traces (not only the last batch), so the
-- result is the same whatever order and in however many batches a trace's spans arrived, and
-- a duplicate delivery changes nothing.
-- Set-based throughout: no loop over runs.

-- 0. Where to start reading spans: the earliest first arrival of a touched trace, less a margin
-- for a wall clock stepped back between two writes (received_at is now() of each write).
-- A trace seen for the first time arrives now, in this transaction, and has no derived rows
-- yet, so step 8 deletes only for traces seen before (most of a stream's batches are new
-- traces, and each delete is a scan of its whole table).
-- touched_traces(trace_id, since) says since when each trace has spans not yet derived: the
-- derivation may run long after the write that stored them (see store/derivation.py).
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

-- 0b. Exceptions recorded as OTLP log records (SPEC §9): a record with exception.type and a
-- span context is an exception event of that span, for rule 4 and as rule 6's evidence. All
-- of a touched trace's records, whenever they came (a record may arrive before or after its
-- span; a late one marks its trace, store/sql/mark_pending_log_exceptions.sql), in time order.
CREATE OR REPLACE TEMP TABLE derive_log_exceptions AS
SELECT trace_id, span_id,
       list(exception_type ORDER BY time_ns, record_key_hi, record_key_lo) AS types
FROM log_records
WHERE exception_type IS NOT NULL AND span_id IS NOT NULL
  AND trace_id IN (SELECT trace_id FROM touched_traces)
GROUP BY trace_id, span_id;

-- 1. The touched traces' spans, recognised as steps by SPEC §9's table and classed by §3
-- rules 1-5 (the marked fragments are filled from store/conventions.py, the one place those
-- rules are written). `specific` is the class rules 1-4 give other than the fallback `error`:
-- a step without one may take a descendant's (rule 6, derive_rolled below).
CREATE OR REPLACE TEMP TABLE derive_spans AS
WITH picked AS (
    SELECT s.*,
           /*@step_row*/ AS step_row,
           -- The exception types of each span (SPEC §3 rule 4), gathered in this one place:
           -- its `exception` events, then the exception log records carrying its context.
           list_filter(list_concat(s.exception_types, coalesce(le.types, [])),
                       lambda x: trim(x) <> '') AS exception_texts
    FROM spans s
    LEFT JOIN derive_log_exceptions le ON le.trace_id = s.trace_id AND le.span_id = s.span_id
    WHERE s.received_at >= (SELECT received_floor FROM derive_floor)
      AND s.trace_id IN (SELECT trace_id FROM touched_traces)
), recognised AS (
    SELECT *,
           /*@step_kind*/ AS step_kind,
           /*@step_name*/ AS step_name,
           /*@convention*/ AS convention,
           /*@is_agent*/ AS is_agent,
           /*@needs_no_step_ancestor*/ AS needs_no_step_ancestor,
           coalesce(trim(error_type) <> '', false) OR len(exception_texts) > 0 AS has_error_type,
           -- rule 4's texts in order: error.type, the exception types, the status message of
           -- an ERROR span; each normalised, with its code (only where there is one: the
           -- lambdas cost ~10 µs a span, and most spans have none)
           CASE WHEN trim(error_type) <> '' OR len(exception_texts) > 0 OR status_code = 2
           THEN list_transform(list_transform(
               list_concat(CASE WHEN trim(error_type) <> '' THEN [error_type] ELSE [] END,
                           exception_texts,
                           CASE WHEN status_code = 2 THEN [status_message] ELSE [] END),
               lambda x: /*@normalise_x*/),
               lambda n: {'n': n, 'c': /*@code_n*/}) END AS error_texts
    FROM picked
), classed AS (
    SELECT *,
           coalesce(/*@outcome_class*/, /*@http_class*/, /*@grpc_class*/,
                    list_filter(list_transform(error_texts, lambda p: /*@text_class*/),
                                lambda c: c IS NOT NULL)[1],
                    CASE WHEN /*@tool_timeout_result*/ THEN 'client_timeout' END) AS specific
    FROM recognised
)
SELECT trace_id, span_id, parent_span_id, name, start_ns, end_ns, status_code, service_name,
       gen_ai_agent_name, budget_total_ms, budget_deadline_unix_ms, budget_reserve_ms,
       budget_run_outcome, budget_remaining_ms, budget_cap_ms, budget_allocated_ms,
       budget_side_effect, budget_effect_status, budget_idempotency_key, budget_attempt,
       budget_hedge, budget_reconcile_result, budget_cleanup_ms,
       budget_total_ms IS NOT NULL OR parent_span_id IS NULL AS is_run,
       step_row IS NOT NULL AS matches_row,
       -- a step whatever its ancestors; row 12 waits for the walk (no step above it)
       step_row IS NOT NULL AND NOT needs_no_step_ancestor AS is_step,
       needs_no_step_ancestor, is_agent,
       step_kind, step_name, convention,
       specific,
       -- rules 4 (fallback) and 5
       coalesce(specific, CASE WHEN has_error_type OR status_code = 2 THEN 'error' ELSE 'ok' END)
           AS own_class,
       -- rule 6: what counts as outcome evidence on a descendant
       budget_outcome IS NOT NULL OR http_response_status_code IS NOT NULL
           OR grpc_status_code IS NOT NULL OR has_error_type AS has_evidence,
       list_transform(links, lambda l: {'trace_id': l.trace_id, 'span_id': l.span_id})
           AS link_targets
FROM classed;

-- 2. Walk down from every run span. A nested run (a span with its own budget.total_ms) is still
-- a step of the outer run when it is one (`own`), but what is below it belongs to it
-- (`nested`). Its spans still count for the outer run's latest end (overrun, SPEC §4).
-- Per span: whether it is a step of this run (row 12 only with no step above it other than an
-- agent), its nearest step above (`step_parent`, NULL for the run), whether an agent lies above
-- it (the run's agent, step 3), and the steps above it and itself (`path`, for rule 6's
-- roll-up; it starts with the run span, which may be its own single step).
-- The depth cap stops a malformed parent cycle from recursing forever.
CREATE OR REPLACE TEMP TABLE derive_walk AS
WITH RECURSIVE walk(trace_id, run_span_id, span_id, is_step, step_parent, step_ctx,
                    plain_step_above, agent_above, parent_agent_above, path, own, nested,
                    depth, start_ns, end_ns, is_agent, step_kind, step_name, specific,
                    has_evidence) AS (
    -- A run span that matches a row other than an agent's counts as a step above its spans
    -- for row 12: it is either a step of an outer run or its own single step (the HTTP call
    -- inside an auto-instrumented model call is no step of its own).
    SELECT trace_id, span_id, span_id, false, NULL::VARCHAR, NULL::VARCHAR,
           matches_row AND NOT is_agent, false, false, [span_id], false, false, 0,
           start_ns, end_ns, is_agent, step_kind, step_name, specific, has_evidence
    FROM derive_spans WHERE is_run
    UNION ALL
    -- "c is a step of this run" is spelled out in each column: a recursive member cannot
    -- name its own expressions
    SELECT c.trace_id, w.run_span_id, c.span_id,
           (NOT w.nested AND (c.is_step
                OR (c.needs_no_step_ancestor AND NOT w.plain_step_above))),
           w.step_ctx,
           CASE WHEN (NOT w.nested AND (c.is_step
                OR (c.needs_no_step_ancestor AND NOT w.plain_step_above)))
                THEN c.span_id ELSE w.step_ctx END,
           w.plain_step_above OR ((NOT w.nested AND (c.is_step
                OR (c.needs_no_step_ancestor AND NOT w.plain_step_above))) AND NOT c.is_agent),
           w.agent_above OR ((NOT w.nested AND (c.is_step
                OR (c.needs_no_step_ancestor AND NOT w.plain_step_above))) AND c.is_agent),
           w.agent_above,
           CASE WHEN (NOT w.nested AND (c.is_step
                OR (c.needs_no_step_ancestor AND NOT w.plain_step_above)))
                THEN list_append(w.path, c.span_id) ELSE w.path END,
           NOT w.nested,
           w.nested OR c.is_run,
           w.depth + 1,
           -- what the steps below read of each walked span, carried along rather than
           -- joined back to derive_spans four times
           c.start_ns, c.end_ns, c.is_agent, c.step_kind, c.step_name, c.specific,
           c.has_evidence
    FROM walk w
    JOIN derive_spans c ON c.trace_id = w.trace_id AND c.parent_span_id = w.span_id
    -- A span has one parent, so the walk of a run reaches a span twice only through the run
    -- span itself lying on a parent cycle: not walking back into it keeps every span at its
    -- shallowest (only) path, without deduplicating every row afterwards (~10% of the
    -- derivation). The depth cap stays as a backstop.
    WHERE w.depth < 200 AND c.span_id <> w.run_span_id
)
SELECT * FROM walk;

-- 3. Run-level facts that depend neither on steps nor on B (derive_measure.sql applies B).
CREATE OR REPLACE TEMP TABLE derive_run_facts AS
WITH first_agent AS (
    -- SPEC §9: the earliest-starting agent span with no agent above it inside the run (below
    -- the run span: an agent run span without gen_ai.agent.name is often a workflow's)
    SELECT trace_id, run_span_id, arg_min(step_name, (start_ns, span_id)) AS name
    FROM derive_walk
    WHERE is_agent AND own AND is_step AND NOT parent_agent_above
    GROUP BY ALL
), runs_raw AS (
    SELECT r.*,
           -- the root is the run "trace_id" only when the trace has exactly one root
           count(*) FILTER (WHERE r.parent_span_id IS NULL)
               OVER (PARTITION BY r.trace_id) AS roots_in_trace,
           -- the run's agent (SPEC §9): the run span's gen_ai.agent.name, else its first
           -- agent's name, else the resource's service.name
           coalesce(r.gen_ai_agent_name, a.name, r.service_name) AS agent
    FROM derive_spans r
    LEFT JOIN first_agent a ON a.trace_id = r.trace_id AND a.run_span_id = r.span_id
    WHERE r.is_run
), latest AS (
    SELECT trace_id, run_span_id, max(end_ns) AS latest_end_ns
    FROM derive_walk
    GROUP BY ALL
)
SELECT CASE WHEN r.parent_span_id IS NULL AND r.roots_in_trace = 1 THEN r.trace_id
            ELSE r.trace_id || '/' || r.span_id END AS run_id,
       r.trace_id, r.span_id,
       r.agent,
       r.start_ns, r.end_ns,
       r.budget_total_ms, r.budget_deadline_unix_ms,
       r.budget_reserve_ms AS reserve_ms,
       r.budget_run_outcome AS outcome,
       l.latest_end_ns,
       printf('%d-W%02d', isoyear(make_timestamp(r.start_ns // 1000)),
              week(make_timestamp(r.start_ns // 1000))) AS week
FROM runs_raw r
JOIN latest l ON l.trace_id = r.trace_id AND l.run_span_id = r.span_id;

-- 4. Steps (SPEC §9). First the steps of each run as the walk found them, each with its
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
    WHERE r.is_run AND r.matches_row
      AND NOT EXISTS (SELECT 1 FROM walked w
                      WHERE w.trace_id = r.trace_id AND w.run_span_id = r.span_id)
      AND NOT EXISTS (SELECT 1 FROM walked w
                      WHERE w.trace_id = r.trace_id AND w.span_id = r.span_id)
), found AS (
    SELECT * FROM walked UNION ALL SELECT * FROM self_steps
), children AS (
    SELECT trace_id, run_span_id, step_parent AS span_id, count(*) AS steps_below
    FROM found WHERE step_parent IS NOT NULL GROUP BY ALL
)
SELECT f.trace_id, f.run_span_id, f.span_id, f.step_parent, f.step_kind,
       f.is_agent AND count(*) OVER (PARTITION BY f.trace_id, f.run_span_id, f.step_parent) = 1
           AND coalesce(c.steps_below, 0) > 0 AS transparent
FROM found f
LEFT JOIN children c ON c.trace_id = f.trace_id AND c.run_span_id = f.run_span_id
                    AND c.span_id = f.span_id;

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
-- give that span.
CREATE OR REPLACE TEMP TABLE derive_rolled AS
SELECT trace_id, run_span_id, above AS span_id, specific AS rolled_class
FROM (
    SELECT trace_id, run_span_id, span_id, unnest(path) AS above, specific, end_ns, start_ns
    FROM derive_walk
    WHERE has_evidence AND depth > 0
)
WHERE above <> span_id
QUALIFY row_number() OVER (PARTITION BY trace_id, run_span_id, above
                           ORDER BY end_ns DESC, start_ns DESC, span_id DESC) = 1;

CREATE OR REPLACE TEMP TABLE derive_step_facts AS
WITH classed AS (
    SELECT t.*, s.*,
           -- rule 6: a step without evidence of its own (rule 4's fallback or rule 5), not OK
           CASE WHEN s.specific IS NULL AND s.status_code <> 1
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
       -- SPEC §6: effect_status decides when present; absent that, the class does
       coalesce(s.budget_side_effect = 'write', false) AND CASE
           WHEN s.budget_effect_status IS NOT NULL THEN s.budget_effect_status = 'possible'
           ELSE s.class IN ('client_timeout', 'cancelled') END AS is_uncertain,
       CASE WHEN s.step_kind = 'reconcile' THEN s.link_targets END AS link_targets
FROM classed s
JOIN derive_run_facts r ON r.trace_id = s.trace_id AND r.span_id = s.run_span_id;

-- The tools lifted out of a model step (SPEC §9), kept for derive_budgets.sql: what the
-- consumption share needs of the step tree when only B changed.
DELETE FROM step_lifts WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
INSERT INTO step_lifts BY NAME
SELECT trace_id, run_span_id, span_id, lifted_from FROM derive_tree WHERE lifted_from IS NOT NULL;

-- The rest (B, deadlines, allocations, consumption, blame, the stored rows) is
-- derive_measure.sql, run next in the same transaction.
DROP TABLE derive_rolled;
DROP TABLE derive_step_tree;
DROP TABLE derive_walk;
DROP TABLE derive_spans;
DROP TABLE derive_log_exceptions;
DROP TABLE derive_floor;
DROP TABLE derive_touched;
