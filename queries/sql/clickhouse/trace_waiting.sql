-- name: trace_waiting
-- A trace that has spans in otel_traces but no run; ClickHouse dialect of sql/trace_waiting.sql.
-- The derived tables are rebuilt whole, with no arrival time: a trace without its root is
-- measured once its last span ended longer ago than the grace period, at the next build.
SELECT toInt64(count()) AS spans,
       if(count() > 0, max(toDateTime64(Timestamp, 3, 'UTC')), NULL) AS waiting_since,
       false AS pending
FROM otel_traces WHERE TraceId = {trace_id:String};
