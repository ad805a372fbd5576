-- name: runs_with_steps
-- Run ids of the runs in the filter holding a step (nested ones too) of step key $step_key and/or of class $step_class: the Runs page's and `report runs`' step filters.
SELECT DISTINCT run_id
FROM steps
WHERE ($since_ns::BIGINT IS NULL OR run_start_ns >= $since_ns::BIGINT)
  AND ($until_ns::BIGINT IS NULL OR run_start_ns < $until_ns::BIGINT)
  AND ($agent::VARCHAR IS NULL OR agent = $agent::VARCHAR)
  AND ($step_key::VARCHAR IS NULL OR step_key = $step_key::VARCHAR)
  AND ($step_class::VARCHAR IS NULL OR class = $step_class::VARCHAR)
ORDER BY run_id;
