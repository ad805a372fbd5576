-- name: new_log_records
-- Of the log records this write stored (`new_log_keys`), those with a span context whose span
-- is not stored (yet): their span may never have been received, or may still come (spans of a
-- trace arrive in any order). Counted, never refused.
SELECT count(*) FILTER (WHERE l.span_id IS NOT NULL AND k.span_key IS NULL) AS span_missing
FROM incoming_logs l
JOIN new_log_keys n USING (record_key_hi, record_key_lo)
LEFT JOIN span_keys k
       ON k.trace_key_hi = l.trace_key_hi AND k.trace_key_lo = l.trace_key_lo
      AND k.span_key = l.span_key
