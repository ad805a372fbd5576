-- name: bench_replicate_spans
-- DuckDB: copies $first_copy..$last_copy-1 of the sample spans in bench_sample into spans, with the ids bench_replicate_otel_traces.sql gives in ClickHouse.
INSERT INTO spans BY NAME
SELECT s.* REPLACE (
           md5(trace_id || '/' || copy::VARCHAR) AS trace_id,
           left(md5(span_id || '/' || copy::VARCHAR), 16) AS span_id,
           CASE WHEN parent_span_id IS NOT NULL
                THEN left(md5(parent_span_id || '/' || copy::VARCHAR), 16) END AS parent_span_id,
           list_transform(links, lambda l: struct_pack(
               trace_id := md5(l.trace_id || '/' || copy::VARCHAR),
               span_id := left(md5(l.span_id || '/' || copy::VARCHAR), 16),
               trace_state := l.trace_state, flags := l.flags, attributes := l.attributes,
               dropped_attributes_count := l.dropped_attributes_count)) AS links,
           now() AS received_at)
FROM bench_sample s, range($first_copy::BIGINT, $last_copy::BIGINT) r(copy)
