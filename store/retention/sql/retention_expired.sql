-- name: retention_expired
-- Traces whose newest span ended before the cutoff ($cutoff_ns, epoch ns): retention removes
-- them whole. A trace is judged by its newest span, not by its run's start, so that a run still
-- sending spans (or a long one that began before the cutoff and ended after it) is never cut in
-- half: it stays until all of it is older than the retention period.
CREATE OR REPLACE TEMP TABLE retention_expired AS
SELECT trace_id
FROM spans
GROUP BY trace_id
HAVING max(end_ns) < $cutoff_ns
