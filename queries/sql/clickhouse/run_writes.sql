-- name: run_writes
-- The write steps of one run with their reconciliation status and idempotency keys (SPEC §6); ClickHouse dialect of sql/run_writes.sql.
WITH own AS (
    SELECT * FROM budgetscope_steps WHERE run_id = {run_id:String}
), w AS (
    SELECT * FROM own WHERE is_write
), matches AS (
    SELECT DISTINCT * FROM (
        SELECT w.span_id AS write_span_id, r.trace_id AS trace_id, r.span_id AS span_id,
               coalesce(r.reconcile_result, 'unknown') AS result, r.start_ns AS start_ns,
               r.end_ns AS end_ns
        FROM w JOIN (SELECT * FROM own WHERE kind = 'reconcile') r
          ON r.idempotency_key = w.idempotency_key
        UNION ALL
        SELECT w.span_id, r.trace_id, r.span_id, r.result, r.start_ns, r.end_ns
        FROM budgetscope_reconcile_links r
        JOIN w ON w.trace_id = r.target_trace_id AND w.span_id = r.target_span_id)
), per_write AS (
    SELECT write_span_id, count() AS reconciliations,
           argMax(result, tuple(start_ns, end_ns, span_id)) AS last_result
    FROM matches GROUP BY write_span_id
)
SELECT w.span_id AS span_id, w.step_key AS step_key, w.class AS step_class,
       w.effect_status AS effect_status, w.idempotency_key AS idempotency_key,
       w.attempt AS attempt, w.is_uncertain AS is_uncertain,
       coalesce(p.reconciliations, 0) AS reconciliations,
       CAST(p.reconciliations IS NOT NULL, 'Bool') AS reconciled,
       CAST(w.is_uncertain AND p.reconciliations IS NULL, 'Bool') AS orphan,
       p.last_result AS last_result,
       (w.start_ns - w.run_start_ns) / 1e6 AS offset_ms
FROM w LEFT JOIN per_write p ON p.write_span_id = w.span_id
ORDER BY w.start_ns, w.span_id;
