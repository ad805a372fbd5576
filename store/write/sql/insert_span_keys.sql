-- name: insert_span_keys
-- The keys of the batch registered as `incoming_spans` (see store/file/schema/span_keys.sql),
-- returning those that were new: a span already stored, or repeated within the batch, returns
-- nothing (or once), and the writer stores only the spans whose keys came back.
INSERT OR IGNORE INTO span_keys
SELECT trace_key_hi, trace_key_lo, span_key
FROM incoming_spans
RETURNING trace_key_hi, trace_key_lo, span_key
