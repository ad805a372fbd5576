-- name: bundled_version_changed
-- The bundled table changed version: forget every match, so that each pair is matched again, and mark the traces it priced (or could not price) for re-measuring.
DELETE FROM price_matches;
DELETE FROM bundled_conditions;
DELETE FROM bundled_prices;
INSERT INTO pending_measurements
SELECT DISTINCT trace_id FROM metered_spans WHERE cost_source IN ('bundled', 'unpriced');
INSERT OR REPLACE INTO budgetscope_meta VALUES ('genai_prices_version', $version);
