-- name: runs_with_steps
-- Run ids of the runs in the filter holding a step (nested ones too) of step key $step_key and/or of class $step_class: the Runs page's and `report runs`' step filters.
SELECT DISTINCT run_id
FROM steps
WHERE /*@run_filter(run_start_ns)*/
  AND ($step_key::VARCHAR IS NULL OR step_key = $step_key::VARCHAR)
  AND ($step_class::VARCHAR IS NULL OR class = $step_class::VARCHAR)
ORDER BY run_id;
