-- name: otel_traces_table
-- The otel_traces table exactly as the OpenTelemetry Collector's ClickHouse exporter creates it (default options).
-- Source: open-telemetry/opentelemetry-collector-contrib,
-- exporter/clickhouseexporter/internal/sqltemplates/traces_table.sql at commit
-- 2bf6b9e1f8c8716ab54eaac1635e56b4d0649900, rendered with its defaults: database and table
-- `otel_traces` in the current database, no cluster (ON CLUSTER is added by the exporter's
-- cluster_name option), engine MergeTree() (the exporter's table_engine default), no TTL, and
-- without full-text search (the bloom-filter branch of its template).
-- budgetscope never creates this table on a real deployment (the exporter does); tests and the
-- benchmark create it in chdb to load traces as the exporter would write them.
CREATE TABLE IF NOT EXISTS otel_traces (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(T64, ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    ResourceAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(ResourceAttributes, 'Array(Tuple(String, String))')),
    SpanAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(SpanAttributes, 'Array(Tuple(String, String))')),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
