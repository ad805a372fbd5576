-- name: derive_walk
-- Walk down from every run span of derive_walk_spans, appending to derive_walk (run up to three times: see derive_refresh.sql).
--
-- A nested run (a span with its own budget.total_ms) is still a step of the outer run when it is
-- one, but what is below it belongs to it: the outer run's walk stops there (`nested`), so each
-- span is walked once, by its nearest run, however deep runs nest (a walk through every nested
-- run cost ~200 rows per run of a chain of them). The nested run's latest end still counts for
-- the outer run's (overrun, docs/metrics.md §4): derive_steps.sql adds it up the runs' own tree.
-- Per span: whether it is a step of this run (row 12 only with no step above it other than an
-- agent), its nearest step above (`step_parent`, NULL for the run), and the steps above it and
-- itself (`path`, for rule 6's roll-up; it starts with the run span, which may be
-- its own single step). Spans whose parent never arrived hang below their trace's run span
-- (`walk_parent`, derive_refresh.sql).
-- The depth cap stops a malformed parent cycle from recursing forever.
INSERT INTO derive_walk BY NAME
WITH RECURSIVE walk(trace_id, run_span_id, span_id, is_step, step_parent, step_ctx,
                    plain_step_above, path, own, nested, depth, start_ns,
                    end_ns, is_agent, step_row, step_kind, step_name, needs_no_step_ancestor,
                    specific, has_evidence) AS (
    -- A run span that matches a row other than an agent's counts as a step above its spans
    -- for row 12: it is either a step of an outer run or its own single step (the HTTP call
    -- inside an auto-instrumented model call is no step of its own).
    SELECT trace_id, span_id, span_id, false, NULL::VARCHAR, NULL::VARCHAR,
           candidate AND NOT is_agent, [span_id], false, false, 0,
           start_ns, end_ns, is_agent, step_row, step_kind, step_name, needs_no_step_ancestor,
           specific, has_evidence
    FROM derive_walk_spans WHERE is_run
    UNION ALL
    -- "c is a step of this run" is spelled out in each column: a recursive member cannot
    -- name its own expressions
    SELECT c.trace_id, w.run_span_id, c.span_id,
           (NOT w.nested AND (c.is_step
                OR (c.candidate AND c.needs_no_step_ancestor AND NOT w.plain_step_above))),
           w.step_ctx,
           CASE WHEN (NOT w.nested AND (c.is_step
                OR (c.candidate AND c.needs_no_step_ancestor AND NOT w.plain_step_above)))
                THEN c.span_id ELSE w.step_ctx END,
           w.plain_step_above OR ((NOT w.nested AND (c.is_step
                OR (c.candidate AND c.needs_no_step_ancestor AND NOT w.plain_step_above)))
                AND NOT c.is_agent),
           CASE WHEN (NOT w.nested AND (c.is_step
                OR (c.candidate AND c.needs_no_step_ancestor AND NOT w.plain_step_above)))
                THEN list_append(w.path, c.span_id) ELSE w.path END,
           NOT w.nested,
           w.nested OR c.is_run,
           w.depth + 1,
           -- what the steps below read of each walked span, carried along rather than
           -- joined back to derive_spans
           c.start_ns, c.end_ns, c.is_agent, c.step_row, c.step_kind, c.step_name,
           c.needs_no_step_ancestor, c.specific, c.has_evidence
    FROM walk w
    JOIN derive_walk_spans c ON c.trace_id = w.trace_id AND c.walk_parent = w.span_id
    -- A span has one parent, so the walk of a run reaches a span twice only through the run
    -- span itself lying on a parent cycle: not walking back into it keeps every span at its
    -- shallowest (only) path, without deduplicating every row afterwards (~10% of the
    -- derivation). The depth cap stays as a backstop.
    WHERE w.depth < 200 AND c.span_id <> w.run_span_id AND NOT w.nested
)
SELECT * FROM walk;
