-- name: mark_rootless_due
-- Mark for derivation the traces still waiting for their root whose last span was stored before $cutoff (docs/conventions.md: the grace period has passed).
INSERT INTO pending_derivations
SELECT trace_id, last_received_at FROM traces_awaiting_root
WHERE last_received_at < $cutoff
RETURNING trace_id;
