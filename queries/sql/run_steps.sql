-- name: run_steps
-- Every step of one run in waterfall order (each top-level step followed by its nested steps).
SELECT st.span_id, st.parent_span_id, st.top_step_id, st.is_top_level, st.step_level,
       st.step_key, st.kind, st.name, st.class AS step_class, st.start_ns, st.end_ns, st.duration_ms,
       st.allocated_ms, st.utilisation, st.consumption_ms, st.side_effect, st.effect_status,
       st.idempotency_key, st.attempt, st.is_write, st.is_uncertain,
       (st.start_ns - r.start_ns) / 1e6 AS offset_ms
FROM steps st
JOIN runs r ON r.run_id = st.run_id
LEFT JOIN steps top ON top.run_id = st.run_id AND top.span_id = st.top_step_id
WHERE st.run_id = $run_id AND r.run_id = $run_id AND top.run_id = $run_id
ORDER BY top.start_ns, top.span_id, st.step_level > 0, st.start_ns, st.step_level, st.span_id;
