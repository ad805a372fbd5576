-- name: insert_spans
-- Stores the batch registered as `incoming_spans` (typed in Python, see ingest/decode/any_value.py),
-- stamping when it was committed: the common case, when insert_span_keys found every key new
-- and distinct (so nothing in the batch is a span stored already or twice).
INSERT INTO spans BY NAME
SELECT * EXCLUDE (trace_key_hi, trace_key_lo, span_key, arrival), now() AS received_at
FROM incoming_spans
