-- name: attribution_report
-- Per step key over the exhausted runs in the filter: budget share, culprit and holder counts (docs/metrics.md §4).
-- budget_share = Σ consumption of the key's top-level steps / Σ B of all exhausted runs in the
-- filter, so the shares of all keys plus the unattributed time add up to at most 1.
-- exhausted_runs = how many of those runs have the key among their top-level steps.
WITH exhausted AS (
    SELECT run_id, budget_ms, culprit_key, holder_key
    FROM runs
    WHERE exhausted
      AND /*@run_filter(start_ns)*/
), total AS (
    SELECT sum(budget_ms) AS budget_ms FROM exhausted
), consumed AS (
    SELECT step_key, sum(consumption_ms) AS consumption_ms, count(DISTINCT run_id) AS runs
    FROM steps
    WHERE is_top_level AND run_exhausted
      AND /*@run_filter(run_start_ns)*/
    GROUP BY step_key
), culprits AS (
    SELECT culprit_key AS step_key, count(*) AS runs FROM exhausted GROUP BY ALL
), holders AS (
    SELECT holder_key AS step_key, count(*) AS runs FROM exhausted GROUP BY ALL
)
SELECT c.step_key,
       c.consumption_ms / total.budget_ms AS budget_share,
       coalesce(cu.runs, 0) AS culprit_runs,
       coalesce(h.runs, 0) AS holder_runs,
       c.runs AS exhausted_runs
FROM consumed c
CROSS JOIN total
LEFT JOIN culprits cu USING (step_key)
LEFT JOIN holders h USING (step_key)
ORDER BY budget_share DESC, culprit_runs DESC, step_key;
