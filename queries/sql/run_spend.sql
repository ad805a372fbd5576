-- name: run_spend
-- One run's metered spans in the order its bill is known, by end, then start, then span id (docs/metrics.md §11.6, the crosser's order): the run view's cumulative spend.
-- top_step_id is the top-level step the span belongs to (NULL: unattributed); cost_nano is NULL
-- for an unpriced span (unknown, never 0); cost_source says where a known cost came from.
-- Only metered spans: an aggregate (a framework's total) is never part of the sum (§11.2).
SELECT span_id, top_step_id, start_ns, end_ns, model, tokens, cost_nano, cost_source
FROM metered_spans
WHERE run_id = $run_id
  AND is_metered
ORDER BY end_ns, start_ns, span_id;
