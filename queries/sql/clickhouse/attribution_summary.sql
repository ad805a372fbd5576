-- name: attribution_summary
-- Over the exhausted runs in the filter: how many, and how often the culprit is the holder (SPEC §4); ClickHouse dialect of sql/attribution_summary.sql.
SELECT count() AS exhausted_runs,
       countIf(culprit_span_id IS NOT NULL AND holder_span_id IS NOT NULL)
           AS runs_with_culprit_and_holder,
       countIf(culprit_span_id = holder_span_id) AS culprit_is_holder_runs,
       countIf(culprit_span_id = holder_span_id)
           / nullIf(countIf(culprit_span_id IS NOT NULL AND holder_span_id IS NOT NULL), 0)
           AS culprit_is_holder_rate,
       sumOrNull(unattributed_ms) / nullIf(sumOrNull(budget_ms), 0) AS unattributed_share
FROM budgetscope_runs
WHERE exhausted
  AND ({since_ns:Nullable(Int64)} IS NULL OR start_ns >= {since_ns:Nullable(Int64)})
  AND ({until_ns:Nullable(Int64)} IS NULL OR start_ns < {until_ns:Nullable(Int64)})
  AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)});
