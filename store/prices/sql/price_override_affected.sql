-- name: price_override_affected
-- The traces whose metered spans the price entry ($model_pattern, $provider, $from_ns) prices or may price, as the temp table price_affected(trace_id, runs).
-- A reported cost never changes (docs/metrics.md §11.8); a span that started before a dated
-- entry is not priced by it. Spans the entry may not win for after all (a more precise entry)
-- are measured again to the same number: cheaper than deciding here.
CREATE OR REPLACE TEMP TABLE price_affected AS
SELECT trace_id, count(DISTINCT run_id) AS runs
FROM metered_spans
WHERE is_metered AND cost_source IS DISTINCT FROM 'reported'
  AND (lower(model) = $model_pattern
       OR (ends_with($model_pattern, '*')
           AND starts_with(lower(model), left($model_pattern, -1))))
  AND ($provider = '' OR provider = $provider)
  AND ($from_ns IS NULL OR start_ns >= $from_ns)
GROUP BY trace_id
