-- name: attribution_summary
-- Over the exhausted runs in the filter: how many, and how often the culprit is the holder (docs/metrics.md §4).
-- culprit_is_holder_rate compares steps (span ids), not step keys: a run whose 2nd and 9th calls
-- to the same tool are culprit and holder counts as culprit ≠ holder. Runs without a culprit or
-- holder (no top-level step) are left out of the rate.
SELECT count(*) AS exhausted_runs,
       count(*) FILTER (WHERE culprit_span_id IS NOT NULL AND holder_span_id IS NOT NULL)
           AS runs_with_culprit_and_holder,
       count(*) FILTER (WHERE culprit_span_id = holder_span_id) AS culprit_is_holder_runs,
       count(*) FILTER (WHERE culprit_span_id = holder_span_id)
           / nullif(count(*) FILTER (WHERE culprit_span_id IS NOT NULL
                                       AND holder_span_id IS NOT NULL), 0)
           AS culprit_is_holder_rate,
       sum(unattributed_ms) / nullif(sum(budget_ms), 0) AS unattributed_share
FROM runs
WHERE exhausted
  AND /*@run_filter(start_ns)*/;
