-- name: simulation_steps
-- Top-level steps of the runs simulation_runs returns, with what the replay needs to re-time them (any order: the replay sorts); ClickHouse dialect of sql/simulation_steps.sql.
-- tie is a hash of the span id, as in the DuckDB file, but ClickHouse's (cityHash64), not
-- DuckDB's hash(): only the order of steps that start and end at the same nanosecond can differ.
WITH picked AS (
    SELECT run_id, start_ns AS run_start_ns,
           toInt64(row_number() OVER (ORDER BY run_id) - 1) AS run_index
    FROM budgetscope_runs
    WHERE ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
      AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
      AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
)
SELECT p.run_index AS run_index,
       s.step_key AS step_key,
       s.class AS class,
       s.start_ns - p.run_start_ns AS start_offset_ns,
       s.end_ns - p.run_start_ns AS end_offset_ns,
       s.remaining_ms AS remaining_ms,
       s.cap_ms AS cap_ms,
       s.allocated_ms AS allocated_ms,
       s.is_write AS is_write,
       coalesce(s.attempt, 1) AS attempt,
       cityHash64(s.span_id) AS tie
FROM budgetscope_steps s
JOIN picked p ON p.run_id = s.run_id
WHERE s.is_top_level
  AND ({since_ns:Nullable(Int64)} IS NULL OR s.run_start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR s.run_start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR s.agent = {agent:Nullable(String)});
