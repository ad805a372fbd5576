-- name: prices_override_get
-- The rates of one price entry, to tell whether a change changed anything.
SELECT input_rate, output_rate, cache_read_rate, cache_write_rate
FROM budgetscope_price_overrides
WHERE model_pattern = {model_pattern:String} AND provider = {provider:String}
  AND isNotDistinctFrom(from_ns, {from_ns:Nullable(Int64)})
