-- name: reconciliation_by_period
-- Write steps per UTC day (and its ISO week) of the run start and step key: reconciliation rate and orphans (docs/metrics.md §6).
-- The dashboard sums the days into weeks on long ranges, and shows days on short ones.
-- Only whether a write was read back counts here, not how often or with what result, so this
-- asks it of the filter's writes alone instead of reading the write_steps view, which counts
-- and ranks every reconciliation in the database first (most of the Reconciliation page's
-- time on large files). The rule is the reconciliations view's (store/file/schema/derived.sql): a
-- reconcile step with the write's idempotency key in the same run, or a span link to it. A
-- reconcile step of the same run has the run's start and agent, so the filter holds for it too.
WITH writes AS (
    SELECT trace_id, span_id, run_id, idempotency_key, step_key, run_start_ns, is_uncertain
    FROM steps
    WHERE is_write AND /*@run_filter(run_start_ns)*/
), by_key AS (
    SELECT DISTINCT run_id, idempotency_key
    FROM steps
    WHERE kind = 'reconcile' AND idempotency_key IS NOT NULL
      AND /*@run_filter(run_start_ns)*/
), by_link AS (
    SELECT DISTINCT target_trace_id, target_span_id FROM reconcile_links
), read_back AS (
    SELECT w.step_key, w.run_start_ns, w.is_uncertain,
           k.run_id IS NOT NULL OR l.target_trace_id IS NOT NULL AS reconciled
    FROM writes w
    LEFT JOIN by_key k ON k.run_id = w.run_id AND k.idempotency_key = w.idempotency_key
    LEFT JOIN by_link l ON l.target_trace_id = w.trace_id AND l.target_span_id = w.span_id
)
SELECT printf('%d-W%02d', isoyear(make_timestamp(run_start_ns // 1000)),
              week(make_timestamp(run_start_ns // 1000))) AS week,
       strftime(make_timestamp(run_start_ns // 1000), '%Y-%m-%d') AS day,
       step_key,
       count(*) AS write_steps,
       count(*) FILTER (WHERE reconciled) AS reconciled_writes,
       count(*) FILTER (WHERE is_uncertain AND NOT reconciled) AS orphan_writes,
       count(*) FILTER (WHERE reconciled) / count(*) AS reconciliation_rate
FROM read_back
GROUP BY ALL
ORDER BY week, day, step_key;
