-- name: mark_declared_affected
-- Mark the traces in declared_affected for measuring again (see store/file/schema/pending.sql): only B
-- changed, so the derivation re-measures their stored runs and steps instead of deriving them
-- from their spans (store/derive/sql/derive_budgets.sql).
INSERT INTO pending_measurements
SELECT trace_id FROM declared_affected
