-- name: runs_by_agent
-- Runs per agent and the newest run start in ns, all time (filters unused); ClickHouse dialect of sql/runs_by_agent.sql.
SELECT agent, count() AS runs, max(start_ns) AS newest_start_ns
FROM budgetscope_runs
GROUP BY agent
ORDER BY agent NULLS LAST;
