-- name: prices_overrides_list
-- Every price a team set, by model pattern, then provider, then date, undated first (as store/prices/sql/price_overrides_list.sql).
SELECT model_pattern, provider, from_ns, input_rate, output_rate, cache_read_rate,
       cache_write_rate, formatDateTime(declared_at, '%Y-%m-%dT%H:%i:%SZ', 'UTC') AS declared_at
FROM budgetscope_price_overrides
ORDER BY model_pattern, provider, from_ns NULLS FIRST
