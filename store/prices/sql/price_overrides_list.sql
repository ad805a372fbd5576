-- name: price_overrides_list
-- Every price a team set, by model pattern, then provider, then date (undated first).
SELECT model_pattern, provider, from_ns, input_rate, output_rate, cache_read_rate,
       cache_write_rate, declared_at
FROM price_overrides
ORDER BY model_pattern, provider, from_ns NULLS FIRST
