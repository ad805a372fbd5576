-- name: prices_override_insert
-- Store a price entry, after prices_override_delete removed the one it replaces.
INSERT INTO budgetscope_price_overrides
    (model_pattern, provider, from_ns, input_rate, output_rate, cache_read_rate,
     cache_write_rate, declared_at)
SELECT {model_pattern:String}, {provider:String}, {from_ns:Nullable(Int64)},
       {input_rate:Int64}, {output_rate:Int64}, {cache_read_rate:Nullable(Int64)},
       {cache_write_rate:Nullable(Int64)}, now64(3)
