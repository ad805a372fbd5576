-- name: runs_by_agent
-- Runs per agent and the newest run start in ns, all time: the dashboard sidebar's agent list and counts (filters unused).
-- Replaces reading the whole runs report for that: 50k runs, 0.26 s warm against 0.01 s.
SELECT agent, count(*) AS runs, max(start_ns) AS newest_start_ns
FROM runs
GROUP BY agent
ORDER BY agent NULLS LAST;
