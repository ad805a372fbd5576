-- name: cost_attribution_report
-- Per step key over the runs in the filter that exhausted their dollar ($dimension 'usd') or token ('tokens') budget: budget share, culprit and crosser runs (docs/metrics.md §11.6, §11.9).
-- budget_share = Σ consumption of the key's top-level steps / Σ budget, both over the exhausted
-- runs whose budget in that dimension is known: a run exhausted by its stated outcome or a
-- refusal with no known budget counts in exhausted_runs and culprit_runs, but has no share
-- (§11.5). Shares are not clipped: parallel calls each pay in full, so keys can add up past 1.
-- exhausted_runs = how many of those runs have the key among their top-level steps.
-- Steps are joined to the exhausted runs by run id (usually a small set; steps carry no
-- per-dimension exhaustion flag). Sums are HUGEINT (Int128 on ClickHouse, where an Int64 sum
-- would wrap): a run's amounts stop at BIGINT's largest, their sums need not.
-- The exhausted runs (their budget, culprit and crosser in the dimension) are the fragment
-- sql/fragments/exhausted_runs.sql, which cost_attribution_summary.sql reads too.
WITH exhausted AS (
    /*@exhausted_runs*/
), total AS (
    SELECT sum(CAST(budget AS HUGEINT)) AS budget FROM exhausted
), consumed AS (
    SELECT s.step_key,
           sum(CAST(CASE WHEN $dimension::VARCHAR = 'usd' THEN s.consumption_usd_nano
                         ELSE s.consumption_tokens END AS HUGEINT))
               FILTER (WHERE e.budget IS NOT NULL) AS consumption,
           count(DISTINCT s.run_id) AS runs
    FROM steps s
    JOIN exhausted e ON e.run_id = s.run_id
    WHERE s.is_top_level
      AND /*@run_filter(s.run_start_ns)*/
    GROUP BY s.step_key
), culprits AS (
    SELECT culprit_key AS step_key, count(*) AS runs FROM exhausted GROUP BY culprit_key
), crossers AS (
    SELECT crosser_key AS step_key, count(*) AS runs FROM exhausted GROUP BY crosser_key
)
SELECT c.step_key,
       CAST(c.consumption AS DOUBLE) / CAST(nullif(total.budget, 0) AS DOUBLE) AS budget_share,
       coalesce(cu.runs, 0) AS culprit_runs,
       coalesce(cr.runs, 0) AS crosser_runs,
       c.runs AS exhausted_runs
FROM consumed c
CROSS JOIN total
LEFT JOIN culprits cu ON cu.step_key = c.step_key
LEFT JOIN crossers cr ON cr.step_key = c.step_key
ORDER BY budget_share DESC NULLS LAST, culprit_runs DESC, c.step_key;
