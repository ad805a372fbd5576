-- name: derive_recognise
-- The candidate steps the walk took for steps that are wrappers, and the second walk's spans (as store/sql_derive/derive_recognise.sql).
--
-- One call, two nested spans (a model step whose nearest step below is a model step, a tool
-- step whose nearest step below has its key; two budget steps stay two, an instrumentation's
-- span inside a budget step is the wrapper), and a row-11 span with a step of rows 1-10 below.
CREATE TABLE budgetscope_tmp_below_step ENGINE = MergeTree ORDER BY tuple() AS
SELECT w.trace_id AS trace_id, w.span_id AS span_id, assumeNotNull(w.step_parent) AS step_parent,
       c.step_row AS step_row, c.step_kind AS step_kind,
       concat(c.step_kind, ':', c.step_name) AS step_key, p.step_row AS parent_row,
       p.step_kind AS parent_kind, concat(p.step_kind, ':', p.step_name) AS parent_key
FROM budgetscope_tmp_walk w
JOIN budgetscope_tmp_spans c ON c.trace_id = w.trace_id AND c.span_id = w.span_id
JOIN budgetscope_tmp_spans p ON p.trace_id = w.trace_id AND p.span_id = w.step_parent
WHERE w.own AND w.is_step AND w.step_parent IS NOT NULL;

CREATE TABLE budgetscope_tmp_demoted ENGINE = MergeTree ORDER BY tuple() AS
WITH RECURSIVE over_steps AS (
    SELECT trace_id, step_parent AS span_id, span_id AS below
    FROM budgetscope_tmp_below_step
    WHERE parent_row = '11' AND coalesce(step_row IN (/*@rows_before_11*/), false)
    UNION ALL
    SELECT b.trace_id, b.step_parent, b.span_id
    FROM budgetscope_tmp_below_step b
    JOIN over_steps o ON b.trace_id = o.trace_id AND b.span_id = o.span_id
    WHERE b.parent_row = '11'
)
SELECT trace_id, if(parent_row = '1', span_id, step_parent) AS span_id, 'twin' AS reason,
       if(parent_row = '1', step_parent, span_id) AS because_of
FROM budgetscope_tmp_below_step
WHERE NOT (step_row = '1' AND parent_row = '1')
  AND ((step_kind = 'model' AND parent_kind = 'model')
       OR (step_kind = 'tool' AND parent_key = step_key))
UNION ALL
SELECT trace_id, span_id, 'over_steps' AS reason, min(below) AS because_of
FROM over_steps GROUP BY trace_id, span_id;

-- The second walk: only the traces with such a wrapper, their wrappers no candidates.
ALTER TABLE budgetscope_tmp_walk DELETE
WHERE trace_id IN (SELECT trace_id FROM budgetscope_tmp_demoted) SETTINGS mutations_sync = 2;
DROP VIEW budgetscope_tmp_walk_spans;
CREATE VIEW budgetscope_tmp_walk_spans AS
SELECT s.* EXCEPT (candidate, is_step),
       s.candidate AND (s.trace_id, s.span_id) NOT IN
           (SELECT trace_id, span_id FROM budgetscope_tmp_demoted) AS candidate,
       s.is_step AND (s.trace_id, s.span_id) NOT IN
           (SELECT trace_id, span_id FROM budgetscope_tmp_demoted) AS is_step
FROM budgetscope_tmp_spans s
WHERE s.trace_id IN (SELECT trace_id FROM budgetscope_tmp_demoted);
