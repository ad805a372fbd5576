-- name: derive_recognise
-- Find the candidate steps the walk took for steps that are wrappers (docs/conventions.md), and set up a second walk of their traces.
--
-- The walk treats every candidate of rows 1-11 as a step. Two kinds are wrappers after all,
-- which only what lies below them tells:
-- - one call, two spans, nested: a model step with a model step as its nearest step below, or
--   a tool step with a tool step of the same key (an SDK's own span inside a library's, a
--   framework's span around the client's). Only the inner one is a step. Two budget steps
--   (row 1) stay two (a retry attempt inside its tool step); an instrumentation's span inside
--   a budget step of the same kind is the wrapper instead, since the budget step carries the
--   call's record (its allocation, its outcome).
-- - row 11: a span of another operation with a step of rows 1-10 below it (at any depth,
--   through further row-11 spans).
-- The traces where either is found are walked again without them (derive_walk.sql): which
-- spans are steps, their nearest step above and row 12's test all change below a wrapper.
-- gates: whether any run holds another (the depth search of runs below); whether any trace has
-- a row-11 candidate (the second search below) derive_refresh.sql said
SELECT (SELECT count(*) FROM derive_walk WHERE nested AND depth > 0) > 0 AS nested_runs;

-- An event record is not a call (docs/conventions.md): an unnamed step of rows 2-9 (named by its
-- span name) with a span of its kind among the steps above it, or the run span, is a wrapper (an
-- instrumentation built from a framework's events records a failure again as a 0 ms `error`
-- child of the failed call). Decided first: such a child never makes the call above it a twin.
-- Its evidence rolls up as any span's. `because_of`: the nearest such span above it.
CREATE OR REPLACE TEMP TABLE derive_demoted (
    trace_id VARCHAR, span_id VARCHAR, reason VARCHAR, because_of VARCHAR
);
-- when: unnamed
INSERT INTO derive_demoted
SELECT e.trace_id, e.span_id, 'event_record', arg_max(e.above, e.position)
FROM (
    SELECT w.trace_id, w.span_id, w.step_kind, unnest(w.path[:-2]) AS above,
           generate_subscripts(w.path[:-2], 1) AS position
    FROM derive_walk w
    SEMI JOIN (SELECT trace_id, span_id FROM derive_spans WHERE unnamed) u
           ON u.trace_id = w.trace_id AND u.span_id = w.span_id
    WHERE w.own AND w.is_step AND w.step_kind IN ('model', 'tool') AND len(w.path) > 1
) e
JOIN derive_spans p ON p.trace_id = e.trace_id AND p.span_id = e.above
WHERE p.step_row IS NOT NULL AND p.step_kind = e.step_kind
GROUP BY e.trace_id, e.span_id;

-- A preparation span is not a call (docs/conventions.md): a model step that shows no sign of a call
-- (no span below it, not a CLIENT span, no outcome evidence nor error, no usage nor response:
-- model_sign false) whose next span under the same parent starts after it ends and is a model span
-- of the same name that shows one (model_sign true, or a span below it) is the in-process
-- preparation of that call (LlamaIndex's `OpenAILike._prepare_chat_with_tools`, before every call):
-- a wrapper. Not merged: two calls in parallel (neither ends before the other starts), a cached
-- answer (it carries the response), a quiet span followed by another quiet one, or by anything
-- else first. Decided before the twins, as event records are. `because_of`: that call.
-- when: quiet_models
INSERT INTO derive_demoted
WITH models AS (
    -- the model spans of the table, each with whether a span hangs below it
    SELECT s.trace_id, s.span_id, s.walk_parent, s.start_ns, s.end_ns, s.step_name, s.model_sign,
           EXISTS (SELECT 1 FROM derive_spans c
                   WHERE c.trace_id = s.trace_id AND c.walk_parent = s.span_id) AS has_child
    FROM derive_spans s
    WHERE s.step_row IS NOT NULL AND s.step_kind = 'model'
), signed AS (
    -- the step names a call shows a sign under, by trace: a quiet span of another name, or in a
    -- trace with none, has no call to prepare (runs whose model steps are all quiet, as the
    -- budget attributes alone make them, are passed over before their siblings are ordered)
    SELECT DISTINCT trace_id, step_name FROM models WHERE model_sign OR has_child
), quiet AS (
    SELECT m.trace_id, m.span_id, m.walk_parent, m.start_ns, m.end_ns, m.step_name
    FROM models m
    SEMI JOIN signed g ON g.trace_id = m.trace_id AND g.step_name = m.step_name
    SEMI JOIN (SELECT trace_id, span_id FROM derive_walk
               WHERE own AND is_step AND step_kind = 'model') w
           ON w.trace_id = m.trace_id AND w.span_id = m.span_id
    WHERE NOT m.model_sign AND NOT m.has_child AND m.walk_parent IS NOT NULL
), next_span AS (
    -- the span under the same parent that starts next (ties: the smaller span id first)
    SELECT q.trace_id, q.span_id, q.end_ns, q.step_name,
           arg_min(n.span_id, (n.start_ns, n.span_id)) AS next_id
    FROM quiet q
    JOIN derive_spans n ON n.trace_id = q.trace_id AND n.walk_parent = q.walk_parent
    WHERE (n.start_ns, n.span_id) > (q.start_ns, q.span_id)
    GROUP BY ALL
)
SELECT q.trace_id, q.span_id, 'preparation', q.next_id
FROM next_span q
JOIN models n ON n.trace_id = q.trace_id AND n.span_id = q.next_id
WHERE n.start_ns >= q.end_ns AND n.step_name = q.step_name AND (n.model_sign OR n.has_child);

INSERT INTO derive_demoted
-- each model or tool step below a model or tool step (its nearest step above), an event record
-- or a preparation apart
SELECT w.trace_id,
       CASE WHEN p.step_row = '1' THEN w.span_id ELSE w.step_parent END AS span_id,
       'twin' AS reason,
       CASE WHEN p.step_row = '1' THEN w.step_parent ELSE w.span_id END AS because_of
FROM derive_walk w
JOIN (SELECT trace_id, span_id, step_row, step_kind, step_name FROM derive_spans
      WHERE step_kind IN ('model', 'tool')) p
  ON p.trace_id = w.trace_id AND p.span_id = w.step_parent
WHERE w.own AND w.is_step AND w.step_kind IN ('model', 'tool')
  AND NOT EXISTS (SELECT 1 FROM derive_demoted d
                  WHERE d.trace_id = w.trace_id AND d.span_id = w.span_id)
  AND NOT (w.step_row = '1' AND p.step_row = '1')
  AND ((w.step_kind = 'model' AND p.step_kind = 'model')
       OR (w.step_kind = 'tool' AND p.step_kind = 'tool' AND p.step_name = w.step_name));

-- when: row_11
INSERT INTO derive_demoted
WITH RECURSIVE below_step AS (
    -- each step with the row of its nearest step above, when that is a row-11 span
    SELECT w.trace_id, w.span_id, w.step_parent, w.step_row
    FROM derive_walk w
    JOIN (SELECT trace_id, span_id FROM derive_spans WHERE step_row = '11') p
      ON p.trace_id = w.trace_id AND p.span_id = w.step_parent
    WHERE w.own AND w.is_step
), over_steps(trace_id, span_id, below) AS (
    SELECT trace_id, step_parent, span_id
    FROM below_step
    WHERE coalesce(step_row IN (/*@rows_before_11*/), false)
    UNION
    SELECT b.trace_id, b.step_parent, b.span_id
    FROM over_steps o
    JOIN below_step b ON b.trace_id = o.trace_id AND b.span_id = o.span_id
)
SELECT trace_id, span_id, 'over_steps', min(below) FROM over_steps GROUP BY ALL;

-- Runs nest at most 16 deep (a run inside a run inside …): a span with budget.total_ms deeper
-- than that is measured as part of the run around it, so that a trace of N nested runs costs
-- at most 17 rows a run in derive_steps.sql's run tree, not N²/2 (said on the trace).
CREATE OR REPLACE TEMP TABLE derive_deep_runs (trace_id VARCHAR, span_id VARCHAR);
-- when: nested_runs
INSERT INTO derive_deep_runs
WITH RECURSIVE edges AS (
    SELECT trace_id, run_span_id AS outer_run, span_id AS inner_run
    FROM derive_walk WHERE nested AND depth > 0
), depths(trace_id, span_id, run_depth) AS (
    SELECT w.trace_id, w.span_id, 1
    FROM derive_walk w
    WHERE w.depth = 0
      AND NOT EXISTS (SELECT 1 FROM edges e
                      WHERE e.trace_id = w.trace_id AND e.inner_run = w.span_id)
    UNION ALL
    SELECT d.trace_id, e.inner_run, d.run_depth + 1
    FROM depths d JOIN edges e ON e.trace_id = d.trace_id AND e.outer_run = d.span_id
    WHERE d.run_depth <= 16
)
-- every run not reached within 16 nestings from a run of its trace that no run holds
SELECT w.trace_id, w.span_id FROM derive_walk w
WHERE w.depth = 0
  AND NOT EXISTS (SELECT 1 FROM depths d
                  WHERE d.trace_id = w.trace_id AND d.span_id = w.span_id AND d.run_depth <= 16)
  AND w.trace_id IN (SELECT trace_id FROM depths WHERE run_depth > 16);

-- when: nested_runs
INSERT INTO derivation_notes BY NAME
SELECT DISTINCT trace_id, 'runs_nested_too_deep' AS note,
       'runs nested more than 16 deep are measured as part of the run around them' AS detail
FROM derive_deep_runs;

-- The second walk: only the traces with such a wrapper or too deep a run, their wrappers no
-- candidates and those runs no runs.
CREATE OR REPLACE TEMP TABLE derive_rewalked AS
SELECT trace_id FROM derive_demoted UNION SELECT trace_id FROM derive_deep_runs;

-- gates: whether a second walk has anything to do
SELECT (SELECT count(*) FROM derive_rewalked) > 0 AS rewalk;
-- when: rewalk
DELETE FROM derive_walk WHERE trace_id IN (SELECT trace_id FROM derive_rewalked);
-- when: rewalk
UPDATE derive_spans SET is_run = false
FROM derive_deep_runs r WHERE r.trace_id = derive_spans.trace_id AND r.span_id = derive_spans.span_id;
-- when: rewalk
CREATE OR REPLACE TEMP VIEW derive_walk_spans AS
SELECT s.* REPLACE (s.candidate AND d.span_id IS NULL AS candidate,
                    s.is_step AND d.span_id IS NULL AS is_step)
FROM derive_spans s
LEFT JOIN (SELECT DISTINCT trace_id, span_id FROM derive_demoted) d
       ON d.trace_id = s.trace_id AND d.span_id = s.span_id
WHERE s.trace_id IN (SELECT trace_id FROM derive_rewalked);
