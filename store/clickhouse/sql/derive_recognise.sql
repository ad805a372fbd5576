-- name: derive_recognise
-- The candidate steps the walk took for steps that are wrappers, and the second walk's spans (as store/derive/sql/derive_recognise.sql).
--
-- One call, two nested spans (a model step whose nearest step below is a model step, a tool
-- step whose nearest step below has its key; two budget steps stay two, an instrumentation's
-- span inside a budget step is the wrapper), and a row-11 span with a step of rows 1-10 below;
-- before them, event records and preparation spans.
CREATE TABLE budgetscope_tmp_below_step ENGINE = Memory SETTINGS compress = 1 AS
SELECT w.trace_id AS trace_id, w.span_id AS span_id, assumeNotNull(w.step_parent) AS step_parent,
       c.step_row AS step_row, c.step_kind AS step_kind,
       concat(c.step_kind, ':', c.step_name) AS step_key, p.step_row AS parent_row,
       p.step_kind AS parent_kind, concat(p.step_kind, ':', p.step_name) AS parent_key
FROM budgetscope_tmp_walk w
JOIN budgetscope_tmp_spans c ON c.trace_id = w.trace_id AND c.span_id = w.span_id
JOIN budgetscope_tmp_spans p ON p.trace_id = w.trace_id AND p.span_id = w.step_parent
WHERE w.own AND w.is_step AND w.step_parent IS NOT NULL;

-- An event record is not a call (as derive_recognise.sql): an unnamed step of rows 2-9 with a
-- span of its kind among the steps above it, or the run span, is a wrapper; decided first.
CREATE TABLE budgetscope_tmp_event_records ENGINE = Memory SETTINGS compress = 1 AS
SELECT e.e_trace_id AS trace_id, e.e_span_id AS span_id, argMax(e.above, e.position) AS because_of
FROM (
    SELECT w.trace_id AS e_trace_id, w.span_id AS e_span_id, c.step_kind AS e_kind, above,
           position
    FROM budgetscope_tmp_walk w
    JOIN budgetscope_tmp_spans c ON c.trace_id = w.trace_id AND c.span_id = w.span_id
    ARRAY JOIN arrayPopBack(w.path) AS above, arrayEnumerate(arrayPopBack(w.path)) AS position
    WHERE w.own AND w.is_step AND c.unnamed AND c.step_kind IN ('model', 'tool')
      AND length(w.path) > 1
) e
JOIN (SELECT trace_id AS p_trace_id, span_id AS p_span_id, step_row, step_kind
      FROM budgetscope_tmp_spans) p ON p.p_trace_id = e.e_trace_id AND p.p_span_id = e.above
WHERE p.step_row IS NOT NULL AND p.step_kind = e.e_kind
GROUP BY e.e_trace_id, e.e_span_id;

-- A preparation span is not a call (as derive_recognise.sql): a model step with no sign of a call
-- (no span below it, model_sign false) whose next span under the same parent starts after it
-- ends and is a model span of the same name that shows one is a wrapper; decided first.
CREATE TABLE budgetscope_tmp_preparations ENGINE = Memory SETTINGS compress = 1 AS
WITH quiet AS (
    SELECT s.trace_id AS trace_id, s.span_id AS span_id, s.walk_parent AS walk_parent,
           s.start_ns AS start_ns, s.end_ns AS end_ns, s.step_name AS step_name
    FROM budgetscope_tmp_spans s
    WHERE NOT s.model_sign AND s.walk_parent IS NOT NULL
      AND (s.trace_id, s.span_id) IN (SELECT trace_id, span_id FROM budgetscope_tmp_walk
                                      WHERE own AND is_step)
      AND (s.trace_id, s.span_id) NOT IN (SELECT trace_id, walk_parent FROM budgetscope_tmp_spans
                                          WHERE walk_parent IS NOT NULL)
), next_span AS (
    -- the span under the same parent that starts next (ties: the smaller span id first)
    SELECT q.trace_id AS trace_id, q.span_id AS span_id, any(q.end_ns) AS end_ns,
           any(q.step_name) AS step_name,
           argMin(n.n_span_id, tuple(n.n_start_ns, n.n_span_id)) AS next_id
    FROM quiet q
    JOIN (SELECT trace_id AS n_trace_id, span_id AS n_span_id, walk_parent AS n_parent,
                 start_ns AS n_start_ns
          FROM budgetscope_tmp_spans) n
      ON n.n_trace_id = q.trace_id AND n.n_parent = q.walk_parent
    WHERE tuple(n.n_start_ns, n.n_span_id) > tuple(q.start_ns, q.span_id)
    GROUP BY q.trace_id, q.span_id
)
SELECT q.trace_id AS trace_id, q.span_id AS span_id, q.next_id AS because_of
FROM next_span q
JOIN (SELECT trace_id AS f_trace_id, span_id AS f_span_id, start_ns AS f_start_ns,
             step_row AS f_row, step_kind AS f_kind, step_name AS f_name, model_sign AS f_sign
      FROM budgetscope_tmp_spans) f
  ON f.f_trace_id = q.trace_id AND f.f_span_id = q.next_id
WHERE f.f_start_ns >= q.end_ns AND f.f_row IS NOT NULL AND f.f_kind = 'model'
  AND f.f_name = q.step_name
  AND (coalesce(f.f_sign, false)
       OR (f.f_trace_id, f.f_span_id) IN (SELECT trace_id, walk_parent FROM budgetscope_tmp_spans
                                          WHERE walk_parent IS NOT NULL));

CREATE TABLE budgetscope_tmp_demoted ENGINE = Memory SETTINGS compress = 1 AS
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
       if(parent_row = '1', step_parent, b.span_id) AS because_of
FROM budgetscope_tmp_below_step b
WHERE NOT (step_row = '1' AND parent_row = '1')
  -- (the table's own span_id: the column list above names another span_id)
  AND (b.trace_id, b.span_id) NOT IN (SELECT trace_id, span_id
                                      FROM budgetscope_tmp_event_records)
  AND (b.trace_id, b.span_id) NOT IN (SELECT trace_id, span_id
                                      FROM budgetscope_tmp_preparations)
  AND ((step_kind = 'model' AND parent_kind = 'model')
       OR (step_kind = 'tool' AND parent_key = step_key))
UNION ALL
SELECT trace_id, span_id, 'event_record' AS reason, because_of
FROM budgetscope_tmp_event_records
UNION ALL
SELECT trace_id, span_id, 'preparation' AS reason, because_of
FROM budgetscope_tmp_preparations
UNION ALL
SELECT trace_id, span_id, 'over_steps' AS reason, min(below) AS because_of
FROM over_steps GROUP BY trace_id, span_id;

-- Runs nest at most 16 deep (as derive_recognise.sql): a run not reached within 16 nestings
-- from a run that no run holds is measured as part of the run around it.
CREATE TABLE budgetscope_tmp_deep_runs ENGINE = Memory SETTINGS compress = 1 AS
WITH RECURSIVE edges AS (
    SELECT trace_id, run_span_id AS outer_run, span_id AS inner_run
    FROM budgetscope_tmp_walk WHERE nested AND depth > 0
), depths AS (
    SELECT trace_id, span_id, toUInt32(1) AS run_depth
    FROM budgetscope_tmp_walk
    WHERE depth = 0 AND (trace_id, span_id) NOT IN (SELECT trace_id, inner_run FROM edges)
    UNION ALL
    SELECT d.trace_id, e.inner_run, toUInt32(d.run_depth + 1)
    FROM depths d JOIN edges e ON e.trace_id = d.trace_id AND e.outer_run = d.span_id
    WHERE d.run_depth <= 16
)
SELECT trace_id, span_id FROM budgetscope_tmp_walk
WHERE depth = 0
  AND (trace_id, span_id) NOT IN (SELECT trace_id, span_id FROM depths WHERE run_depth <= 16)
  AND trace_id IN (SELECT trace_id FROM depths WHERE run_depth > 16);

ALTER TABLE budgetscope_tmp_spans UPDATE is_run = false
WHERE (trace_id, span_id) IN (SELECT trace_id, span_id FROM budgetscope_tmp_deep_runs)
SETTINGS mutations_sync = 2;

-- The second walk: only the traces with such a wrapper or too deep a run, their wrappers no
-- candidates and those runs no runs.
ALTER TABLE budgetscope_tmp_walk DELETE
WHERE trace_id IN (SELECT trace_id FROM budgetscope_tmp_demoted)
   OR trace_id IN (SELECT trace_id FROM budgetscope_tmp_deep_runs) SETTINGS mutations_sync = 2;
DROP VIEW budgetscope_tmp_walk_spans;
CREATE VIEW budgetscope_tmp_walk_spans AS
SELECT s.* EXCEPT (candidate, is_step),
       s.candidate AND (s.trace_id, s.span_id) NOT IN
           (SELECT trace_id, span_id FROM budgetscope_tmp_demoted) AS candidate,
       s.is_step AND (s.trace_id, s.span_id) NOT IN
           (SELECT trace_id, span_id FROM budgetscope_tmp_demoted) AS is_step
FROM budgetscope_tmp_spans s
WHERE s.trace_id IN (SELECT trace_id FROM budgetscope_tmp_demoted)
   OR s.trace_id IN (SELECT trace_id FROM budgetscope_tmp_deep_runs);
