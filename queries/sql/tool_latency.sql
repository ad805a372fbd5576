-- name: tool_latency
-- Every tool call's duration beside its cap, so a cap set below a tool's tail shows (one row per call).
-- Refused calls never started and are left out: their duration says nothing about the tool.
SELECT step_key, duration_ms, cap_ms, class
FROM steps
WHERE kind = 'tool' AND class <> 'refused'
  AND /*@run_filter(run_start_ns)*/
ORDER BY step_key, duration_ms;
