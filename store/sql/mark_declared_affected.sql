-- name: mark_declared_affected
-- Mark the traces in declared_affected pending derivation (see schema/pending.sql), reading
-- each from its first arrival: their spans are old, and the derivation reads from the mark on.
INSERT INTO pending_derivations
SELECT d.trace_id, coalesce(a.first_received_at, TIMESTAMPTZ '1970-01-01 00:00:00+00')
FROM declared_affected d
LEFT JOIN (SELECT trace_id, min(first_received_at) AS first_received_at
           FROM trace_arrivals GROUP BY trace_id) a USING (trace_id)
