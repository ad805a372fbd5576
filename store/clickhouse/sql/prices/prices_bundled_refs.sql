-- name: prices_bundled_refs
-- The bundled models whose prices are kept already (store_matches.sql keeps a model's rows once).
SELECT DISTINCT bundled_ref FROM budgetscope_bundled_conditions
