-- name: unmatched_pairs
-- The (model, provider) pairs of the metered spans being derived that the bundled table was not yet asked about.
SELECT DISTINCT m.model_ref, coalesce(m.provider, '') AS provider
FROM derive_metered m
WHERE m.is_metered AND m.model_ref IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM price_matches p
                  WHERE p.model_ref = m.model_ref AND p.provider = coalesce(m.provider, ''))
