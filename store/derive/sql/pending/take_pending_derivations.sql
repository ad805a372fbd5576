-- name: take_pending_derivations
-- The next slice of traces to derive, oldest marks first, as the temp table the derivation
-- reads: a trace marked by several writes once, from its earliest mark. Parameters: how many
-- ($slice); the sizes it takes, at least $at_least and below $below spans at the trace's last
-- derivation (a trace not derived yet counts as 0); and $paced: serve's derivation thread,
-- where a trace derived before waits a pause that grows with its size (1 s per 10,000 spans, at
-- most 30 s) before it is derived again, so late spans or log records trickling into a large
-- trace cost a bounded share of the derivation (docs/design.md).
CREATE OR REPLACE TEMP TABLE touched_traces AS
SELECT p.trace_id, min(p.since) AS since
FROM pending_derivations p
LEFT JOIN trace_arrivals a ON a.trace_id = p.trace_id
WHERE coalesce(a.spans, 0) >= $at_least AND coalesce(a.spans, 0) < $below
  AND (NOT $paced OR a.derived_at IS NULL
       OR a.derived_at + to_milliseconds(least(30000, a.spans // 10)) <= now())
GROUP BY p.trace_id
ORDER BY since, p.trace_id
LIMIT $slice
