-- name: run_ids
-- Every run id, in order (filters unused): a terminal table shortens each to the shortest start no other run shares.
SELECT run_id FROM runs ORDER BY run_id;
