-- name: price_override_delete
-- Remove the price entry ($model_pattern, $provider, $from_ns); a NULL $from_ns is the undated entry.
DELETE FROM price_overrides
WHERE model_pattern = $model_pattern AND provider = $provider
  AND from_ns IS NOT DISTINCT FROM $from_ns
