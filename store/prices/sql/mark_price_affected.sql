-- name: mark_price_affected
-- Mark the traces in price_affected for measuring again (store/file/schema/pending.sql): only their costs change, so the derivation re-measures their stored metered spans, runs and steps (store/derive/sql/derive_budgets.sql, derive_cost.sql).
INSERT INTO pending_measurements
SELECT trace_id FROM price_affected
