-- name: prices_unmatched_pairs
-- The (model, provider) pairs of the metered spans being built that the bundled table was not yet asked about (as store/prices/sql/unmatched_pairs.sql).
SELECT DISTINCT model_ref, coalesce(provider, '') AS provider
FROM budgetscope_tmp_metered
WHERE is_metered AND model_ref IS NOT NULL
  AND (model_ref, coalesce(provider, '')) NOT IN (SELECT model_ref, provider
                                                  FROM budgetscope_price_matches)
ORDER BY model_ref, provider
