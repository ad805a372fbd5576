-- name: bench_replicate_otel_traces
-- Copies first_copy..last_copy-1 of the sample rows in bench_sample into otel_traces, each with new trace, span and link ids.
-- A copy's id is the first characters of md5(id || '/' || copy) in hex, the same function as
-- bench_replicate_spans.sql applies in DuckDB, so both engines hold the very same spans.
-- Times are kept: every copy lands in the sample's weeks (more runs per week, as a bigger
-- fleet would).
INSERT INTO otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName,
                         SpanKind, ServiceName, ResourceAttributes, ScopeName, ScopeVersion,
                         SpanAttributes, Duration, StatusCode, StatusMessage,
                         `Events.Timestamp`, `Events.Name`, `Events.Attributes`,
                         `Links.TraceId`, `Links.SpanId`, `Links.TraceState`,
                         `Links.Attributes`)
SELECT Timestamp,
       lower(hex(MD5(concat(TraceId, '/', toString(copy))))),
       substring(lower(hex(MD5(concat(SpanId, '/', toString(copy))))), 1, 16),
       if(ParentSpanId = '', '',
          substring(lower(hex(MD5(concat(ParentSpanId, '/', toString(copy))))), 1, 16)),
       TraceState, SpanName, SpanKind, ServiceName, ResourceAttributes, ScopeName,
       ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage,
       `Events.Timestamp`, `Events.Name`, `Events.Attributes`,
       arrayMap(x -> lower(hex(MD5(concat(x, '/', toString(copy))))), `Links.TraceId`),
       arrayMap(x -> substring(lower(hex(MD5(concat(x, '/', toString(copy))))), 1, 16),
                `Links.SpanId`),
       `Links.TraceState`, `Links.Attributes`
FROM bench_sample
ARRAY JOIN range({first_copy:UInt32}, {last_copy:UInt32}) AS copy
