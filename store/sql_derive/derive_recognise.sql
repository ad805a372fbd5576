-- name: derive_recognise
-- Find the candidate steps the walk took for steps that are wrappers (SPEC §9), and set up a second walk of their traces.
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
CREATE OR REPLACE TEMP TABLE derive_demoted AS
WITH RECURSIVE below_step AS (
    -- each step with the kind, key and row of its nearest step above
    SELECT w.trace_id, w.span_id, w.step_parent, w.step_row, w.step_kind,
           w.step_kind || ':' || w.step_name AS step_key, p.step_row AS parent_row,
           p.step_kind AS parent_kind, p.step_kind || ':' || p.step_name AS parent_key
    FROM derive_walk w
    JOIN derive_spans p ON p.trace_id = w.trace_id AND p.span_id = w.step_parent
    WHERE w.own AND w.is_step
), over_steps(trace_id, span_id, below) AS (
    SELECT trace_id, step_parent, span_id
    FROM below_step
    WHERE parent_row = '11' AND coalesce(step_row IN (/*@rows_before_11*/), false)
    UNION
    SELECT b.trace_id, b.step_parent, b.span_id
    FROM over_steps o
    JOIN below_step b ON b.trace_id = o.trace_id AND b.span_id = o.span_id
    WHERE b.parent_row = '11'
)
SELECT trace_id, CASE WHEN parent_row = '1' THEN span_id ELSE step_parent END AS span_id,
       'twin' AS reason,
       CASE WHEN parent_row = '1' THEN step_parent ELSE span_id END AS because_of
FROM below_step
WHERE NOT (step_row = '1' AND parent_row = '1')
  AND ((step_kind = 'model' AND parent_kind = 'model')
       OR (step_kind = 'tool' AND parent_key = step_key))
UNION ALL
SELECT trace_id, span_id, 'over_steps', min(below) FROM over_steps GROUP BY ALL;

-- The second walk: only the traces with such a wrapper, their wrappers no candidates.
DELETE FROM derive_walk WHERE trace_id IN (SELECT trace_id FROM derive_demoted);
CREATE OR REPLACE TEMP VIEW derive_walk_spans AS
SELECT s.* REPLACE (s.candidate AND d.span_id IS NULL AS candidate,
                    s.is_step AND d.span_id IS NULL AS is_step)
FROM derive_spans s
LEFT JOIN (SELECT DISTINCT trace_id, span_id FROM derive_demoted) d
       ON d.trace_id = s.trace_id AND d.span_id = s.span_id
WHERE s.trace_id IN (SELECT trace_id FROM derive_demoted);
