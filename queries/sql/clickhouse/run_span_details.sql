-- name: run_span_details
-- What the spans of one run's steps carry, from the Collector's otel_traces; ClickHouse dialect of sql/run_span_details.sql.
-- Attributes arrive as strings there (the exporter writes AsString), so every value is a JSON
-- string; events are rebuilt as the DuckDB store keeps them ({time_ns, name, attributes}). A
-- span the Collector delivered twice shows once (LIMIT 1 BY). No dropped counts are kept.
SELECT SpanId AS span_id,
       toString(SpanName) AS span_name,
       toInt8(multiIf(StatusCode IN ('Error', 'STATUS_CODE_ERROR'), 2,
                      StatusCode IN ('Ok', 'STATUS_CODE_OK'), 1, 0)) AS status_code,
       StatusMessage AS status_message,
       toJSONString(CAST(SpanAttributes, 'Map(String, String)')) AS attributes,
       toJSONString(arrayMap((t, n, a) -> CAST(tuple(toUnixTimestamp64Nano(t), toString(n),
                                                      CAST(a, 'Map(String, String)')),
                                               'Tuple(time_ns Int64, name String, attributes Map(String, String))'),
                             Events.Timestamp, Events.Name, Events.Attributes)) AS events,
       toUInt32(0) AS dropped_attributes_count,
       toUInt32(0) AS dropped_events_count
FROM otel_traces
WHERE TraceId = {trace_id:String}
  AND SpanId IN (SELECT span_id FROM budgetscope_steps WHERE run_id = {run_id:String})
  AND ({span_id:Nullable(String)} IS NULL OR SpanId = {span_id:Nullable(String)})
ORDER BY Timestamp, SpanId
LIMIT 1 BY SpanId;
