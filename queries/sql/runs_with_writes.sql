-- name: runs_with_writes
-- Run ids of the runs in the filter holding a write step that is uncertain, reconciled or an orphan, whichever of $uncertain, $reconciled, $orphan is true (docs/metrics.md §6): the Runs page's and `report runs`' write filter.
SELECT DISTINCT run_id
FROM write_steps
WHERE /*@run_filter(run_start_ns)*/
  AND (($uncertain::BOOLEAN AND is_uncertain)
       OR ($reconciled::BOOLEAN AND reconciled)
       OR ($orphan::BOOLEAN AND orphan))
ORDER BY run_id;
