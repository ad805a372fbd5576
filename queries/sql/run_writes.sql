-- name: run_writes
-- The write steps of one run with their reconciliation status and idempotency keys (docs/metrics.md §6).
-- The same rules as the write_steps view, restricted to one run first so that a lookup reads
-- that run's rows (one index scan) and the links aimed at its trace, not every write stored.
WITH own AS MATERIALIZED (
    SELECT * FROM steps WHERE run_id = $run_id
), w AS (
    SELECT * FROM own WHERE is_write
), matches AS (
    SELECT w.span_id AS write_span_id, r.trace_id, r.span_id,
           coalesce(r.reconcile_result, 'unknown') AS result, r.start_ns, r.end_ns
    FROM w JOIN (SELECT * FROM own WHERE kind = 'reconcile') r
      ON r.idempotency_key = w.idempotency_key
    UNION
    SELECT w.span_id, r.trace_id, r.span_id, r.result, r.start_ns, r.end_ns
    FROM reconcile_links r
    JOIN w ON w.trace_id = r.target_trace_id AND w.span_id = r.target_span_id
), per_write AS (
    SELECT write_span_id, count(*) AS reconciliations,
           arg_max(result, (start_ns, end_ns, span_id)) AS last_result
    FROM matches GROUP BY ALL
)
SELECT w.span_id, w.step_key, w.class AS step_class, w.effect_status, w.idempotency_key,
       w.attempt, w.is_uncertain,
       coalesce(p.reconciliations, 0) AS reconciliations,
       p.reconciliations IS NOT NULL AS reconciled,
       w.is_uncertain AND p.reconciliations IS NULL AS orphan,
       p.last_result,
       (w.start_ns - w.run_start_ns) / 1e6 AS offset_ms
FROM w LEFT JOIN per_write p ON p.write_span_id = w.span_id
ORDER BY w.start_ns, w.span_id;
