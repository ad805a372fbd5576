-- name: derive_walk
-- Walk down from every run span of budgetscope_tmp_walk_spans into budgetscope_tmp_walk (as store/derive/sql/derive_walk.sql; run twice).
--
-- Per span: whether it is a step of this run (row 12 only with no step above it other than an
-- agent), its nearest step above, and the steps above it and itself (`path`, rule 6).
-- A nested run is still a step of the outer run when it is one, but what is below it belongs
-- to it: the outer run's walk stops there (`nested`), so each span is walked once. Spans whose parent never arrived hang below their trace's run span
-- (`walk_parent`). The depth cap stops a malformed parent cycle from recursing forever; a span
-- reached twice (only in a cyclic trace) keeps its shallowest path.
INSERT INTO budgetscope_tmp_walk
WITH RECURSIVE walk AS (
    SELECT trace_id, span_id AS run_span_id, span_id, false AS is_step,
           CAST(NULL, 'Nullable(String)') AS step_parent,
           CAST(NULL, 'Nullable(String)') AS step_ctx,
           -- a run span matching a row other than an agent's is a step above, for row 12
           candidate AND NOT is_agent AS plain_step_above,
           [span_id] AS path, false AS own, false AS nested, toUInt32(0) AS depth
    FROM budgetscope_tmp_walk_spans WHERE is_run
    UNION ALL
    SELECT c.trace_id, w.run_span_id, c.span_id,
           (NOT w.nested AND (c.is_step
                OR (c.candidate AND c.needs_no_step_ancestor AND NOT w.plain_step_above))),
           w.step_ctx,
           if(NOT w.nested AND (c.is_step
                OR (c.candidate AND c.needs_no_step_ancestor AND NOT w.plain_step_above)),
              toNullable(c.span_id), w.step_ctx),
           w.plain_step_above OR ((NOT w.nested AND (c.is_step
                OR (c.candidate AND c.needs_no_step_ancestor AND NOT w.plain_step_above)))
                AND NOT c.is_agent),
           if(NOT w.nested AND (c.is_step
                OR (c.candidate AND c.needs_no_step_ancestor AND NOT w.plain_step_above)),
              arrayPushBack(w.path, c.span_id), w.path),
           NOT w.nested,
           w.nested OR c.is_run,
           toUInt32(w.depth + 1)
    FROM budgetscope_tmp_walk_spans c
    JOIN walk w ON c.trace_id = w.trace_id AND c.walk_parent = w.span_id
    WHERE w.depth < 200 AND c.span_id != w.run_span_id AND NOT w.nested
)
SELECT trace_id, run_span_id, span_id, is_step, step_parent, step_ctx, plain_step_above, path,
       own, nested, depth
FROM walk
ORDER BY depth
LIMIT 1 BY trace_id, run_span_id, span_id;
