-- name: run_log_records
-- The log records of one run's trace in the Collector's otel_logs; ClickHouse dialect of sql/run_log_records.sql.
-- A record the Collector delivered twice shows once (the same fields: DISTINCT); the body is
-- the exporter's Body string (AsString of the AnyValue).
SELECT l.time_ns, l.severity_number, l.severity_text, l.span_id, st.step_key, l.body,
       l.exception_type
FROM (
    SELECT DISTINCT toInt64(toUnixTimestamp64Nano(Timestamp)) AS time_ns,
           toInt32(SeverityNumber) AS severity_number, SeverityText AS severity_text,
           nullIf(SpanId, '') AS span_id, Body AS body,
           nullIf(LogAttributes['exception.type'], '') AS exception_type
    FROM otel_logs
    WHERE TraceId = {trace_id:String}
) l
LEFT JOIN (SELECT span_id, step_key FROM budgetscope_steps WHERE run_id = {run_id:String}) st
       ON st.span_id = l.span_id
ORDER BY l.time_ns, l.span_id NULLS FIRST, l.body
LIMIT {limit:Int64};
