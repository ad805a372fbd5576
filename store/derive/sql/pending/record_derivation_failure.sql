-- name: record_derivation_failure
-- One trace whose derivation fails on its own (parameters: trace id, error). Its marks are
-- removed beside this (clear_pending_derivations) so that it is not retried every turn; new
-- spans of the trace mark it again, and then it is retried.
INSERT OR REPLACE INTO derivation_failures (trace_id, error, failed_at)
VALUES (?, ?, now())
