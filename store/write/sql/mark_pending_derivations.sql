-- name: mark_pending_derivations
-- Mark the traces of the batch in `incoming_spans` as needing derivation: one row per trace per
-- write, appended (see store/file/schema/pending.sql); the derivation reads from each trace's
-- earliest mark.
INSERT INTO pending_derivations
SELECT DISTINCT trace_id, now() FROM incoming_spans
