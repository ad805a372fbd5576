-- name: prices_override_affected
-- The traces and runs whose metered spans the price entry (model_pattern, provider, from_ns) prices or may price (as store/prices/sql/price_override_affected.sql), and the stored metered spans of its models at all.
SELECT uniqExactIf(trace_id, affected) AS traces, uniqExactIf(run_id, affected) AS runs,
       countIf(matching) AS matching_spans
FROM (
    SELECT trace_id, run_id,
           lowerUTF8(model) = {model_pattern:String}
               OR (endsWith({model_pattern:String}, '*')
                   AND startsWith(lowerUTF8(model),
                                  substring({model_pattern:String}, 1,
                                            length({model_pattern:String}) - 1))) AS matching,
           matching AND is_metered AND coalesce(cost_source != 'reported', true)
               AND ({provider:String} = '' OR provider = {provider:String})
               AND ({from_ns:Nullable(Int64)} IS NULL OR start_ns >= {from_ns:Nullable(Int64)})
               AS affected
    FROM budgetscope_metered_spans)
