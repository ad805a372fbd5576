-- name: prices_unpriced_models
-- The models of metered spans that have no price, with how many steps and spans, the most first (as store/prices/sql/unpriced_models.sql).
SELECT model, provider,
       uniqExact(concat(trace_id, '/', coalesce(step_span_id, span_id))) AS steps,
       count() AS spans, uniqExact(run_id) AS runs
FROM budgetscope_metered_spans
WHERE cost_source = 'unpriced'
GROUP BY model, provider
ORDER BY steps DESC, spans DESC, model ASC NULLS LAST, provider ASC NULLS FIRST
