-- name: run_steps
-- Every step of one run (one index scan); queries.run_view puts them in waterfall order.
SELECT span_id, parent_span_id, top_step_id, is_top_level, step_level, step_key, kind, name,
       class AS step_class, convention, start_ns, end_ns, duration_ms, remaining_ms, cap_ms,
       allocated_ms, utilisation,
       consumption_ms, side_effect, effect_status, idempotency_key, attempt, is_write,
       is_uncertain, (start_ns - run_start_ns) / 1e6 AS offset_ms
FROM steps
WHERE run_id = $run_id;
