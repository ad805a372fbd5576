-- name: derive_log_exceptions
-- The exception types and messages of OTLP log records by span, from the Collector's otel_logs (docs/conventions.md), for derive_build.sql.
-- Run before derive_build when otel_logs exists (derive_log_exceptions_none.sql otherwise: the
-- same tables, empty). A record with exception.type and a span context is an exception event of
-- that span (§3 rule 4): its types in time order, as the DuckDB derivation reads log_records.
-- A record the Collector delivered twice is read once (the same trace, span, time, severity,
-- body and type).
CREATE TABLE budgetscope_tmp_log_exceptions ENGINE = Memory SETTINGS compress = 1 AS
SELECT trace_id, span_id, arrayMap(x -> x.2, arraySort(groupArray((time_ns, exception_type))))
           AS types,
       arrayFilter(x -> trimBoth(x) != '', arrayMap(x -> x.2, arraySort(
           groupArray((time_ns, exception_message))))) AS messages
FROM (
    SELECT DISTINCT TraceId AS trace_id, SpanId AS span_id,
           toUnixTimestamp64Nano(Timestamp) AS time_ns, SeverityNumber, Body,
           LogAttributes['exception.type'] AS exception_type,
           LogAttributes['exception.message'] AS exception_message
    FROM otel_logs
    WHERE TraceId != '' AND SpanId != '' AND trimBoth(LogAttributes['exception.type']) != ''
)
GROUP BY trace_id, span_id;
-- what the build read, so that readers rebuild when otel_logs grows (derive_state.sql)
CREATE TABLE budgetscope_tmp_log_state ENGINE = Memory SETTINGS compress = 1 AS
SELECT count() AS log_rows FROM otel_logs;
