-- name: prices_override_delete
-- Remove the price entry (model_pattern, provider, from_ns); a NULL from_ns is the undated entry (as store/prices/sql/price_override_delete.sql).
DELETE FROM budgetscope_price_overrides
WHERE model_pattern = {model_pattern:String} AND provider = {provider:String}
  AND isNotDistinctFrom(from_ns, {from_ns:Nullable(Int64)})
