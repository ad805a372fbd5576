-- name: mark_pending_log_exceptions
-- A new log record with exception.type is exception evidence of its span (docs/conventions.md, docs/metrics.md §3 rule 4):
-- its trace is derived again, as a span write would have it (store/file/schema/pending.sql).
-- Only traces whose span is stored are marked; a record that came before its span is read when
-- the span's own write marks the trace.
INSERT INTO pending_derivations
SELECT DISTINCT l.trace_id, now()
FROM incoming_logs l
JOIN new_log_keys n USING (record_key_hi, record_key_lo)
JOIN span_keys k
  ON k.trace_key_hi = l.trace_key_hi AND k.trace_key_lo = l.trace_key_lo
 AND k.span_key = l.span_key
WHERE l.exception_type IS NOT NULL
