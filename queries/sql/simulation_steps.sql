-- name: simulation_steps
-- Top-level steps of the runs simulation_runs returns, with what the replay needs to re-time them (any order: the replay sorts).
-- Nested steps (retry attempts inside a tool step, a subagent's calls) are inside their
-- top-level step's duration and are not replayed on their own. Times are ns from the run start.
-- Deliberately lean, because at 50k runs (840k steps) this read dominates a simulation: no
-- ORDER BY (numpy sorts the integers faster than DuckDB sorts the rows), no kind or name
-- column (both are in step_key), and tie = a hash of the span id, so that steps starting and
-- ending together still sort the same way every time.
WITH picked AS (
    SELECT run_id, start_ns AS run_start_ns,
           row_number() OVER (ORDER BY run_id) - 1 AS run_index
    FROM runs
    WHERE /*@run_filter(start_ns)*/
)
SELECT p.run_index,
       s.step_key,
       s.class,
       s.start_ns - p.run_start_ns AS start_offset_ns,
       s.end_ns - p.run_start_ns AS end_offset_ns,
       s.remaining_ms,
       s.cap_ms,
       s.allocated_ms,
       s.is_write,
       coalesce(s.attempt, 1) AS attempt,
       hash(s.span_id) AS tie
FROM steps s
JOIN picked p ON p.run_id = s.run_id
WHERE s.is_top_level
  AND /*@run_filter(s.run_start_ns)*/;
