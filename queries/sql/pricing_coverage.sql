-- name: pricing_coverage
-- One row over the runs in the filter: how much of their model work is measured, and the frameworks' own totals beside ours (docs/metrics.md §11.2, §11.4): the Cost page's pricing coverage.
-- model_steps counts every model step, nested ones included (a retry inside a model step is a
-- call of its own); a metered one is or lies above a metered span; an unmetered one sent no
-- usage at all (§11.4), possibly billed when its class says the provider may have charged it.
-- metered_share = metered ÷ model steps, NULL without model steps (nothing to divide by).
-- The frameworks' totals: over the runs whose outermost aggregate reported a cost
-- (reported_total_nano, §11.2: shown beside our sum, never added), Σ of those totals and Σ of
-- our cost of the same runs, in HUGEINT handed over as decimal text (dollars in
-- queries/reports.py), NULL when no run carries one.
WITH m AS (
    SELECT count(*) AS model_steps,
           count(*) FILTER (WHERE NOT coalesce(unmetered, false)) AS metered_model_steps,
           count(*) FILTER (WHERE unmetered) AS unmetered_model_steps,
           count(*) FILTER (WHERE possibly_billed) AS possibly_billed_steps
    FROM steps
    WHERE kind = 'model'
      AND /*@run_filter(run_start_ns)*/
), f AS (
    SELECT count(*) FILTER (WHERE reported_total_nano IS NOT NULL) AS runs_with_reported_total,
           sum(CAST(reported_total_nano AS HUGEINT)) AS reported_total,
           sum(CAST(cost_nano AS HUGEINT)) FILTER (WHERE reported_total_nano IS NOT NULL)
               AS computed_total
    FROM runs
    WHERE /*@run_filter(start_ns)*/
)
SELECT m.model_steps,
       m.metered_model_steps,
       m.unmetered_model_steps,
       m.possibly_billed_steps,
       m.metered_model_steps / nullif(m.model_steps, 0) AS metered_share,
       f.runs_with_reported_total,
       CAST(f.reported_total AS VARCHAR) AS reported_total_usd,
       CAST(f.computed_total AS VARCHAR) AS computed_total_usd
FROM m, f;
