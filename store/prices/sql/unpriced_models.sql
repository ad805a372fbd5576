-- name: unpriced_models
-- The models of metered spans that have no price (docs/metrics.md §11.3 step 3), with how many steps and spans, the most first.
SELECT model, provider, count(DISTINCT trace_id || '/' || coalesce(step_span_id, span_id))
           AS steps,
       count(*) AS spans, count(DISTINCT run_id) AS runs
FROM metered_spans
WHERE cost_source = 'unpriced'
GROUP BY model, provider
ORDER BY steps DESC, spans DESC, model NULLS LAST, provider NULLS FIRST
