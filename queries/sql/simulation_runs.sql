-- name: simulation_runs
-- Runs started in [since, until) for the agent filter as the timeout-policy replay reads them, numbered 0..n-1 by run_id.
-- run_index is the join key to simulation_steps (same filter, same numbering): an integer
-- joins and groups far faster in numpy than the 32-character run ids.
SELECT row_number() OVER (ORDER BY run_id) - 1 AS run_index,
       run_id,
       agent,
       start_ns,
       end_ns,
       budget_ms,
       deadline_ns - start_ns AS deadline_offset_ns,
       coalesce(reserve_ms, 0) AS reserve_ms,
       utilisation,
       exhausted
FROM runs
WHERE /*@run_filter(start_ns)*/
ORDER BY run_index;
