-- name: derive_log_exceptions_none
-- derive_log_exceptions.sql's tables, empty: for a ClickHouse without otel_logs (no Collector logs pipeline).
CREATE TABLE budgetscope_tmp_log_exceptions (
    trace_id String, span_id String, types Array(String), messages Array(String)
) ENGINE = Memory SETTINGS compress = 1;
CREATE TABLE budgetscope_tmp_log_state ENGINE = Memory SETTINGS compress = 1 AS
SELECT toUInt64(0) AS log_rows;
