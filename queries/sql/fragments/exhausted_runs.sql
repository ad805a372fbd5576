-- name: exhausted_runs
-- The runs in the filter that exhausted their dollar ($dimension 'usd') or token ('tokens') budget, with that dimension's budget, culprit, crosser and unattributed spend (docs/metrics.md §11.5, §11.6): the body of a CTE, composed into a query as /*@exhausted_runs*/.
-- budget is NULL for a run exhausted by its stated outcome or a refusal while that budget was
-- unknown (§11.5): such a run counts, but has no share. The culprit and crosser are the
-- top-level steps' keys and span ids (a crosser is NULL when the budget was not reached, or
-- was reached under no step). A query leaves out the columns it does not read.
SELECT run_id,
       CASE WHEN $dimension::VARCHAR = 'usd' THEN usd_budget_nano ELSE token_budget END
           AS budget,
       CASE WHEN $dimension::VARCHAR = 'usd' THEN cost_culprit_key
            ELSE token_culprit_key END AS culprit_key,
       CASE WHEN $dimension::VARCHAR = 'usd' THEN cost_crosser_key
            ELSE token_crosser_key END AS crosser_key,
       CASE WHEN $dimension::VARCHAR = 'usd' THEN cost_culprit_span_id
            ELSE token_culprit_span_id END AS culprit_span_id,
       CASE WHEN $dimension::VARCHAR = 'usd' THEN cost_crosser_span_id
            ELSE token_crosser_span_id END AS crosser_span_id,
       CASE WHEN $dimension::VARCHAR = 'usd' THEN unattributed_cost_nano
            ELSE unattributed_tokens END AS unattributed
FROM runs
WHERE coalesce(CASE WHEN $dimension::VARCHAR = 'usd' THEN usd_exhausted
                    ELSE tokens_exhausted END, false)
  AND /*@run_filter(start_ns)*/
