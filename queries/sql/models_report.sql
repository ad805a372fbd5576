-- name: models_report
-- One row per pricing model, provider and price source over the metered spans of the runs in the filter: spans, tokens and known cost (docs/metrics.md §11.9 `report models`).
-- Model and provider are §11.3's, as the derivation normalised them to find a price; the price
-- source is where each span's cost came from (reported, override, bundled, unpriced). Only
-- metered spans: an aggregate (a framework's total above its calls) is never counted (§11.2).
-- input_tokens and output_tokens are §11.1's (cache and reasoning included); a span that sent
-- only a total adds to `spans` and not to them. cost_usd is Σ known costs in nano-dollars,
-- summed in HUGEINT and handed over as its decimal text (exact past BIGINT; dollars in
-- queries/reports.py): NULL for unpriced spans, whose cost is unknown, never 0. Token sums
-- stop at BIGINT's largest rather than fail.
WITH models AS (
    SELECT model,
           provider,
           cost_source AS price_source,
           count(*) AS spans,
           sum(CAST(input_tokens AS HUGEINT)) AS input_tokens,
           sum(CAST(cache_read_tokens AS HUGEINT)) AS cache_read_tokens,
           sum(CAST(cache_write_tokens AS HUGEINT)) AS cache_write_tokens,
           sum(CAST(output_tokens AS HUGEINT)) AS output_tokens,
           sum(CAST(reasoning_tokens AS HUGEINT)) AS reasoning_tokens,
           sum(CAST(cost_nano AS HUGEINT)) AS cost_nano
    FROM metered_spans
    WHERE is_metered
      AND /*@run_filter(run_start_ns)*/
    GROUP BY model, provider, cost_source
)
SELECT model,
       provider,
       price_source,
       spans,
       CAST(least(input_tokens, 9223372036854775807) AS BIGINT) AS input_tokens,
       CAST(least(cache_read_tokens, 9223372036854775807) AS BIGINT) AS cache_read_tokens,
       CAST(least(cache_write_tokens, 9223372036854775807) AS BIGINT) AS cache_write_tokens,
       CAST(least(output_tokens, 9223372036854775807) AS BIGINT) AS output_tokens,
       CAST(least(reasoning_tokens, 9223372036854775807) AS BIGINT) AS reasoning_tokens,
       CAST(cost_nano AS VARCHAR) AS cost_usd
FROM models
ORDER BY cost_nano DESC NULLS LAST, spans DESC, model NULLS LAST, provider NULLS LAST,
         price_source;
