-- name: run_log_records
-- The OTLP log records of one run's trace (at most $limit, by time), each beside its span's step.
-- A small table for the run view, not a log search: time, severity, span, body
-- (docs/conventions.md).
SELECT l.time_ns,
       l.severity_number,
       l.severity_text,
       l.span_id,
       st.step_key,
       coalesce(json_extract_string(l.body, '$'), '') AS body,
       l.exception_type
FROM log_records l
LEFT JOIN (SELECT span_id, step_key FROM steps WHERE run_id = $run_id) st
       ON st.span_id = l.span_id
WHERE l.trace_id = $trace_id
ORDER BY l.time_ns, l.span_id NULLS FIRST, l.record_key_hi, l.record_key_lo
LIMIT $limit;
