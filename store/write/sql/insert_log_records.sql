-- name: insert_log_records
-- Stores the log records registered as `incoming_logs` (rows of ingest/decode/log_flatten.py, distinct
-- by record key), returning the keys of those that were new: a record already stored returns
-- nothing (see store/file/schema/log_records.sql).
INSERT OR IGNORE INTO log_records BY NAME
SELECT * EXCLUDE (trace_key_hi, trace_key_lo, span_key), now() AS received_at
FROM incoming_logs
RETURNING record_key_hi, record_key_lo
