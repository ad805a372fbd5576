-- name: insert_spans
-- Stores the batch registered as `incoming_spans` (typed in Python, see ingest/any_value.py),
-- stamping when it was committed. A span already stored, or repeated within the batch, is
-- ignored by the primary key (trace_id, span_id): exporters retry and files get loaded twice.
INSERT OR IGNORE INTO spans BY NAME
SELECT *, now() AS received_at
FROM incoming_spans
