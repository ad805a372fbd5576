-- name: retention_loose_log_records
-- OTLP log records that belong to no stored trace (no span context, or a trace none of whose
-- spans is stored) and are older than the cutoff ($cutoff_ns): judged by their own time, since
-- no trace takes them along (the records of stored traces go with their trace).
DELETE FROM log_records l
WHERE l.time_ns < $cutoff_ns
  AND (l.trace_id IS NULL
       OR NOT EXISTS (SELECT 1 FROM spans s WHERE s.trace_id = l.trace_id))
