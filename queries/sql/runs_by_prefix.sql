-- name: runs_by_prefix
-- Run ids that start with a prefix (a run id shortened as a list or a chat shows it), at most
-- $limit, so that a unique prefix opens its run and an ambiguous one lists the candidates.
SELECT run_id FROM runs WHERE starts_with(run_id, $prefix) ORDER BY run_id LIMIT $limit;
