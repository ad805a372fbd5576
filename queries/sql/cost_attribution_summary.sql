-- name: cost_attribution_summary
-- One row over the runs in the filter that exhausted their dollar ($dimension 'usd') or token ('tokens') budget: how many, how many had a crosser, culprit_is_crosser_rate and the unattributed share (docs/metrics.md §11.6).
-- culprit_is_crosser_rate counts the runs whose cost culprit and crosser are one and the same
-- top-level step, over the exhausted runs that have a crosser (none when the call that reached
-- the budget lay under no step, or when the run was exhausted by an outcome or a refusal
-- before spending it). unattributed_share = Σ unattributed spend / Σ budget over the exhausted
-- runs with a known budget. NULL when there is nothing to divide by.
-- The exhausted runs are the fragment sql/fragments/exhausted_runs.sql (as in
-- cost_attribution_report.sql).
WITH exhausted AS (
    /*@exhausted_runs*/
)
SELECT count(*) AS exhausted_runs,
       count(*) FILTER (WHERE crosser_span_id IS NOT NULL) AS crossed_runs,
       count(*) FILTER (WHERE crosser_span_id IS NOT NULL AND culprit_span_id = crosser_span_id)
           / nullif(count(*) FILTER (WHERE crosser_span_id IS NOT NULL), 0)
           AS culprit_is_crosser_rate,
       CAST(sum(CAST(unattributed AS HUGEINT)) FILTER (WHERE budget IS NOT NULL) AS DOUBLE)
           / CAST(nullif(sum(CAST(budget AS HUGEINT)), 0) AS DOUBLE) AS unattributed_share
FROM exhausted;
