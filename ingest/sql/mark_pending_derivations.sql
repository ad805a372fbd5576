-- name: mark_pending_derivations
-- Mark the traces of the batch in `incoming_spans` as needing derivation. An existing mark
-- keeps its earlier `since`: the derivation must read from the oldest underived span.
INSERT OR IGNORE INTO pending_derivations
SELECT DISTINCT trace_id, now() FROM incoming_spans
