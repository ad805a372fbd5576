-- name: run_step_costs
-- The tokens and dollars of one run's steps (docs/metrics.md §11.4, §11.6), by span id: queries.run_cost joins them to the run's steps.
-- tokens and cost_nano sum the metered spans that are the step or lie under it (NULL: none);
-- cost_complete is false when one of them is unpriced or the step is an unmetered model step
-- that was possibly billed; consumption is a top-level step's own spend (what belongs to it).
SELECT span_id, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
       reasoning_tokens, tokens, cost_nano, cost_complete, cost_source, unmetered,
       possibly_billed, consumption_usd_nano, consumption_tokens, cost_share, token_share
FROM steps
WHERE run_id = $run_id;
