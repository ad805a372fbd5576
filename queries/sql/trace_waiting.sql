-- name: trace_waiting
-- A trace that has spans stored but no run: how many spans, whether it waits for its root (since when nothing of it arrived), and whether it is still to be derived.
SELECT (SELECT count(*) FROM spans WHERE trace_id = $trace_id) AS spans,
       (SELECT max(last_received_at) FROM traces_awaiting_root WHERE trace_id = $trace_id)
           AS waiting_since,
       (SELECT count(*) FROM pending_derivations WHERE trace_id = $trace_id) > 0 AS pending;
