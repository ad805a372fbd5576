-- name: run_filter
-- The runs in the filter (docs/metrics.md §8 --since/--until/--agent), by their run's start: composed into a query as /*@run_filter(COLUMN)*/.
-- COLUMN is the run start (start_ns on runs, run_start_ns on steps and writes, qualified as
-- s.run_start_ns where the query joins); the agent column carries the same qualifier. A NULL
-- bound value leaves that side open. The values stay bound parameters: only the column names,
-- constants of the query files, are written in.
($since_ns::BIGINT IS NULL OR {start} >= $since_ns::BIGINT)
AND ($until_ns::BIGINT IS NULL OR {start} < $until_ns::BIGINT)
AND ($agent::VARCHAR IS NULL OR {agent} = $agent::VARCHAR)
