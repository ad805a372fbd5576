-- name: retention_take_slice
-- The next $slice_traces expired traces, each still expired at $cutoff_ns: a span that arrived
-- since the pass began (an exporter's late retry) may have made its trace young again.
CREATE OR REPLACE TEMP TABLE retention_slice AS
WITH taken AS (
    SELECT trace_id FROM retention_expired ORDER BY trace_id LIMIT $slice_traces
)
SELECT t.trace_id,
       NOT EXISTS (SELECT 1 FROM spans s
                   WHERE s.trace_id = t.trace_id AND s.end_ns >= $cutoff_ns) AS expired
FROM taken t
