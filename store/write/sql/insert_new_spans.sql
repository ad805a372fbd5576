-- name: insert_new_spans
-- Stores the spans of `incoming_spans` whose keys insert_span_keys just added (registered as
-- `new_span_keys`), the first of each key in arrival order: exporters retry and files get
-- loaded twice, so a batch may hold spans already stored, or one span twice.
INSERT INTO spans BY NAME
SELECT * EXCLUDE (trace_key_hi, trace_key_lo, span_key, arrival), now() AS received_at
FROM incoming_spans
SEMI JOIN new_span_keys USING (trace_key_hi, trace_key_lo, span_key)
QUALIFY row_number() OVER (PARTITION BY trace_key_hi, trace_key_lo, span_key
                           ORDER BY arrival) = 1
