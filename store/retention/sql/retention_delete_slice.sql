-- name: retention_delete_slice
-- Remove the expired traces of retention_slice whole: their derived rows, pending derivation
-- marks and arrival times, then their spans (last, so that the statement's result is the
-- number of spans removed). Runs in one transaction with the slice taken.
DELETE FROM retention_expired WHERE trace_id IN (SELECT trace_id FROM retention_slice);
DELETE FROM runs WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM steps WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
-- links owned by the removed reconcile steps; links from kept traces to a removed write stay
-- (the reconciliations view joins them to steps, so they simply stop matching)
DELETE FROM reconcile_links
WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM step_lifts WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
-- what the rules across traces of docs/conventions.md keep of them
-- (store/file/schema/recognition.sql); a stray call whose step is removed keeps its stored answer
-- until its own trace is removed (retention removes whole traces by age, so the stray, no newer
-- than its step, goes in the same pass or the next)
DELETE FROM call_hulls WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM stray_calls WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM model_span_names
WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM trace_arrivals WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM pending_derivations
WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM pending_measurements
WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM derivation_failures
WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM derivation_notes
WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM traces_awaiting_root
WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
-- the spans' keys (store/file/schema/span_keys.sql), so that a removed trace sent again is stored
DELETE FROM span_keys
WHERE (trace_key_hi, trace_key_lo) IN (
    SELECT ('0x' || substr(trace_id, 1, 16))::UBIGINT, ('0x' || substr(trace_id, 17, 16))::UBIGINT
    FROM retention_slice WHERE expired);
-- the traces' OTLP log records go with them
DELETE FROM log_records WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
DELETE FROM spans WHERE trace_id IN (SELECT trace_id FROM retention_slice WHERE expired);
