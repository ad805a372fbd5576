-- name: derive_explain
-- Why each span of the touched traces is, or is not, a step (docs/conventions.md), from the recognition's temp tables: `budgetscope run --spans`.
--
-- Run on a copy of one trace (store/derive/explain.py) after derive_steps.sql and before
-- derive_drop.sql. One row per span: the run whose walk owns it, its depth there, what it is
-- (`role`), the row that matched it, and a sentence naming the rule (`why`) with the span it
-- refers to, if any (`other_span_id`). Spans are listed in tree order by the caller.
WITH attrs AS (
    -- what the reasons below read of each span, tested as store/derive/conventions.py writes it
    SELECT trace_id, span_id, kind AS span_kind, gen_ai_operation_name AS operation,
           coalesce(/*@agent_span*/, false) AS agent_span,
           coalesce(/*@bookkeeping*/, false) AS bookkeeping,
           coalesce(/*@never_step*/, false) AS never_step
    FROM spans WHERE trace_id IN (SELECT trace_id FROM touched_traces)
), own AS (
    -- each span's row in the walk of the run it belongs to (a nested run's spans belong to it);
    -- a stray joined to a step of another trace is walked in that trace's run (span_trace_id)
    SELECT w.*, coalesce(j.trace_id, w.trace_id) AS span_trace_id
    FROM derive_walk w
    LEFT JOIN derive_stray_joins j ON j.holder_trace_id = w.trace_id AND j.span_id = w.span_id
    WHERE w.own OR w.depth = 0
    QUALIFY row_number() OVER (PARTITION BY span_trace_id, w.span_id
                               ORDER BY w.own DESC, w.depth) = 1
), facts AS (
    SELECT s.trace_id, o.trace_id AS run_trace_id, s.span_id, s.parent_span_id,
           coalesce(j.holder_span_id, s.walk_parent) AS walk_parent, s.name, sp.span_kind,
           s.start_ns, s.end_ns, s.is_run, s.root_missing, s.step_row, s.convention,
           s.step_kind, s.step_name, s.is_agent, s.needs_no_step_ancestor, s.sibling_twin_of,
           sp.operation, sp.agent_span, sp.bookkeeping, sp.never_step,
           o.run_span_id, o.depth, o.is_step AS walked_step, o.step_parent,
           -- the step a span that is none lies in (its evidence rolls up into it); an agent
           -- made transparent is no such step
           CASE WHEN len(o.path) > 1 AND NOT coalesce(it.transparent, false)
                THEN o.path[-1] END AS inside_step,
           t.span_id IS NOT NULL AS final_step, t.step_level, st.transparent,
           d.reason AS demoted, d.because_of, b.tool_span_id AS beside_tool,
           j.holder_span_id AS stray_of, s.unnamed, s.step_name <> s.name AS renamed,
           s.own_class = 'error' AND s.specific IS NULL AND NOT s.has_evidence AS passed_over,
           f.class
    FROM derive_spans s
    JOIN attrs sp ON sp.trace_id = s.trace_id AND sp.span_id = s.span_id
    LEFT JOIN derive_stray_joins j ON j.trace_id = s.trace_id AND j.span_id = s.span_id
    LEFT JOIN own o ON o.span_trace_id = s.trace_id AND o.span_id = s.span_id
    LEFT JOIN derive_tree t ON t.trace_id = o.trace_id AND t.span_id = s.span_id
                           AND t.run_span_id = o.run_span_id
    LEFT JOIN derive_step_tree st ON st.trace_id = o.trace_id AND st.span_id = s.span_id
                                 AND st.run_span_id = o.run_span_id
    LEFT JOIN derive_step_tree it ON it.trace_id = o.trace_id AND it.span_id = o.path[-1]
                                 AND it.run_span_id = o.run_span_id
    LEFT JOIN (SELECT DISTINCT ON (trace_id, span_id) * FROM derive_demoted) d
           ON d.trace_id = s.trace_id AND d.span_id = s.span_id
    LEFT JOIN derive_beside b ON b.trace_id = s.trace_id AND b.span_id = s.span_id
    LEFT JOIN derive_step_facts f ON f.trace_id = s.trace_id AND f.span_id = s.span_id
)
SELECT trace_id, run_trace_id, span_id, parent_span_id, walk_parent, name, span_kind, start_ns,
       end_ns, run_span_id,
       depth, step_row, convention,
       CASE WHEN final_step THEN step_kind || ':' || step_name END AS step_key,
       step_level, class,
       CASE
           WHEN run_span_id IS NULL THEN 'outside'
           WHEN final_step AND span_id = run_span_id THEN 'step'
           WHEN span_id = run_span_id THEN 'run'
           WHEN final_step THEN 'step'
           WHEN transparent THEN 'transparent'
           WHEN sibling_twin_of IS NOT NULL OR demoted = 'twin' THEN 'twin'
           WHEN inside_step IS NOT NULL AND inside_step <> span_id THEN 'part'
           ELSE 'wrapper' END AS role,
       CASE
           WHEN run_span_id IS NULL
               THEN 'in no run: its parent never arrived, and its trace has no run yet'
           WHEN span_id = run_span_id AND root_missing
               THEN 'the run, measured from this span: the trace''s root never arrived'
           WHEN final_step AND span_id = run_span_id
               THEN 'the run and its own single step: it matches a row and holds no step'
           WHEN span_id = run_span_id THEN 'the run (budget.total_ms, or the trace''s root)'
           WHEN final_step AND step_level > 0
               THEN 'a step nested in another (rolls up into its top-level step)'
                    || CASE WHEN unnamed AND step_kind = 'model' AND renamed
                            THEN '; no model name of its own: named as its service''s spans '
                                 || 'of this name' ELSE '' END
           WHEN final_step THEN 'a top-level step'
                    || CASE WHEN unnamed AND step_kind = 'model' AND renamed
                            THEN '; no model name of its own: named as its service''s spans '
                                 || 'of this name' ELSE '' END
           WHEN transparent
               THEN 'an agent alone among its siblings with steps below: transparent'
           WHEN sibling_twin_of IS NOT NULL
               THEN 'one call, two spans: a sibling from another instrumentation around the step'
           WHEN demoted = 'twin'
               THEN 'one call, two spans: the other span of this call is the step'
           WHEN demoted = 'over_steps'
               THEN 'an operation with a step below it: a wrapper'
           WHEN demoted = 'event_record'
               THEN 'an event record of the call above it (no name of its own, below a span '
                    || 'of its kind): not a call, its evidence rolls up'
           WHEN demoted = 'preparation'
               THEN 'a preparation of the model call after it (no sign of a call of its own: '
                    || 'nothing below it, no usage, no answer, no evidence): not a call'
           WHEN stray_of IS NOT NULL
               THEN 'an HTTP client span in a trace of its own, inside one step of another '
                    || 'trace of its service: part of that step'
           WHEN beside_tool IS NOT NULL
               THEN 'a client call beside its tool or model call: part of that call'
           WHEN needs_no_step_ancestor
               THEN 'a client call inside a step: part of it (row 12 needs no step above)'
           WHEN inside_step IS NOT NULL AND inside_step <> span_id AND passed_over
               THEN 'inside a step: part of it (its error gives no class of its own: passed '
                    || 'over by the roll-up)'
           WHEN inside_step IS NOT NULL AND inside_step <> span_id
               THEN 'inside a step: part of it (its evidence rolls up into it)'
           WHEN bookkeeping THEN 'framework bookkeeping: not a step'
           WHEN never_step THEN 'building an agent: never a step'
           WHEN agent_span THEN 'an agent span with no name attribute: a wrapper'
           WHEN operation IS NOT NULL AND span_kind <> 3
               THEN 'an in-process operation (' || operation || '): a wrapper'
           ELSE 'no row of the table matches: a wrapper' END AS why,
       coalesce(sibling_twin_of, because_of, stray_of, beside_tool,
                CASE WHEN NOT final_step AND inside_step <> span_id THEN inside_step END)
           AS other_span_id
FROM facts;
