-- name: log_records
-- log_records: OTLP log records (POST /v1/logs, the gRPC LogsService, resourceLogs in files),
-- one row per record as received. A record is identified by record_key (hi, lo): a 128-bit
-- digest of its trace and span id, time, severity, body, attributes, event name and resource
-- (ingest/decode/log_flatten.py), so that a record sent twice (exporters retry, files get loaded twice)
-- is stored once. Resources and scopes are shared with spans.
-- Records are kept whether or not they carry a span context, and whether or not their span has
-- arrived: spans of a trace arrive in any order, so a record's span may come later.
CREATE TABLE IF NOT EXISTS log_records (
    record_key_hi            UBIGINT NOT NULL,
    record_key_lo            UBIGINT NOT NULL,
    trace_id                 VARCHAR,            -- 32 lowercase hex; NULL without a span context
    span_id                  VARCHAR,            -- 16 lowercase hex; NULL without one
    time_ns                  BIGINT NOT NULL,    -- time_unix_nano, else the observed time
    observed_time_ns         BIGINT NOT NULL,    -- 0 when not sent
    severity_number          TINYINT NOT NULL,   -- OTLP SeverityNumber, 0-24
    severity_text            VARCHAR NOT NULL,
    body                     JSON,               -- the AnyValue body as JSON; NULL when none
    attributes               JSON NOT NULL,
    dropped_attributes_count UINTEGER NOT NULL,
    flags                    UINTEGER NOT NULL,
    event_name               VARCHAR NOT NULL,
    resource_id              VARCHAR NOT NULL,
    scope_id                 VARCHAR NOT NULL,
    service_name             VARCHAR,            -- cache of the resource's service.name
    -- exception.type: with a span context, an exception of that span (docs/conventions.md,
    -- docs/metrics.md §3 rule 4).
    exception_type           VARCHAR,
    received_at              TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (record_key_hi, record_key_lo)
);
