-- name: run_writes
-- The write steps of one run with their reconciliation status and idempotency keys (SPEC §6).
SELECT span_id, step_key, class AS step_class, effect_status, idempotency_key, attempt, is_uncertain,
       reconciliations, reconciled, orphan, last_result,
       (start_ns - run_start_ns) / 1e6 AS offset_ms
FROM write_steps
WHERE run_id = $run_id
ORDER BY start_ns, span_id;
